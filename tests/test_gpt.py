"""The gpt workload's arithmetic against the payload's real module, its refusals, and its command line."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import torch

from clusterctl.cli import main
from clusterctl.inventory import RunDefaults, load_inventory
from clusterctl.results.counters import expected_bytes_per_node
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.gpt import loss_findings
from clusterctl.workloads.gpt_arith import SIZES, GptShape
from tests.helpers.payloads import load_payload
from tests.helpers.strictjson import strict_loads

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
H100 = ROOT / "inventories" / "modern-h100.yml"  # gpus.model H100-SXM5-80GB, 2 nodes x 8


bench = load_payload("gpt_bench")


def test_the_workload_s_sizes_are_the_payload_s() -> None:
    assert SIZES == bench.SIZES


@pytest.mark.parametrize(("size", "seq_len"), [("tiny", 32), ("tiny", 256), ("124m", 1024)])
def test_the_parameter_formula_counts_the_payload_s_module(size: str, seq_len: int) -> None:
    layers, heads, width = SIZES[size]
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        model = bench.GPT(layers, heads, width, seq_len)
    shape = GptShape.named(size, seq_len)
    assert bench.parameter_count(model) == shape.parameters
    blocks = sum(p.numel() for p in model.blocks.parameters())
    assert blocks == shape.block_parameters
    assert model.head.weight is model.wte.weight  # tied: the head adds no parameter


def test_gpt2_small_is_124m_and_its_flops_per_token_follow_palm() -> None:
    shape = GptShape.named("124m", 1024)
    assert shape.parameters == 124_439_808  # GPT-2 small with its 1024 positions
    # 6 x (N - position embedding) + 12 x L x W x S, by hand.
    assert shape.flops_per_token() == 6 * (124_439_808 - 1024 * 768) + 12 * 12 * 768 * 1024 == 855_166_464


def _train(
    model: Any, tokens: torch.Tensor, steps: int = 4
) -> tuple[list[float], list[torch.Tensor], torch.Tensor]:
    """``steps`` AdamW steps of ``model`` on one fixed batch: each step's loss, the first step's
    gradients and the last step's logits."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=bench.LEARNING_RATE)
    losses, grads = [], []
    for step in range(steps):
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        if step == 0:
            grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        optimizer.step()
        losses.append(loss.item())
    return losses, grads, logits


def test_the_payload_s_forward_gives_logits_and_a_falling_loss_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    model = bench.GPT(2, 2, 32, 16, vocab=97)
    losses, _, logits = _train(model, torch.randint(0, 97, (2, 17)))
    assert logits.shape == (2, 16, 97)
    assert losses[-1] < losses[0]


def test_ddp_and_fsdp_bytes_per_step_follow_their_formulas() -> None:
    shape = GptShape.named("tiny", 64)
    p, blocks, root = shape.parameters, shape.block_parameters, shape.root_parameters
    assert shape.ddp_bytes() == 4 * p
    assert shape.fsdp_gathered_bytes("fp32") == 4 * (2 * blocks + root)
    assert shape.fsdp_gathered_bytes("bf16") == 2 * (2 * blocks + root)
    # FSDP moves (N-1)/N x (gathered + 4P) per node: the counter proof's 2(N-1)/N x G with G = half of it.
    for nodes in (2, 4):
        g = shape.fsdp_equivalent_bytes("bf16")
        moved = (nodes - 1) * (shape.fsdp_gathered_bytes("bf16") + 4 * p) // nodes
        assert abs(expected_bytes_per_node(g, nodes) - moved) <= 1
    assert shape.fsdp_equivalent_bytes("fp32") != shape.ddp_bytes()


def _settings(**overrides: Any) -> RunDefaults:
    inventory = load_inventory(SANDBOX)
    return run_options(inventory, "gpt", **overrides).settings


def test_the_run_s_volume_counts_every_step_and_says_how() -> None:
    gpt = get_workload("gpt")
    ddp = gpt.allreduce_volume(
        _settings(framework="ddp", model_size="tiny", seq_len=64, warmup_steps=1, steps=3)
    )
    fsdp = gpt.allreduce_volume(
        _settings(framework="fsdp", model_size="tiny", seq_len=64, warmup_steps=1, steps=3)
    )
    shape = GptShape.named("tiny", 64)
    assert ddp is not None and fsdp is not None
    assert ddp.bytes == shape.ddp_bytes() * 4 and "x 4 steps" in ddp.derivation
    assert fsdp.bytes == shape.fsdp_equivalent_bytes("fp32") * 4 and "FSDP" in fsdp.derivation


def test_mfu_facts_are_the_flops_per_token() -> None:
    facts = get_workload("gpt").compute(_settings(framework="ddp", model_size="124m", seq_len=1024), "")
    assert facts is not None
    assert facts.flops_per_sample == 855_166_464 and facts.precision == "fp32"


def test_loss_findings_refuse_nan_and_flat_losses() -> None:
    assert loss_findings(10.8, 9.1, 5) == []
    assert [f.code for f in loss_findings("nan", 9.1, 5)] == ["loss-not-finite"]
    assert [f.code for f in loss_findings(10.8, 10.8, 5)] == ["loss-not-falling"]
    assert [f.code for f in loss_findings(10.8, None, 5)] == ["loss-not-finite"]
    assert loss_findings(10.8, 10.8, 1) == []  # one step: nothing to compare


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def test_dry_run_prints_the_payload_command_and_the_fsdp_expectation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _main(
        capsys, "run", "gpt", "-i", str(SANDBOX), "--framework", "fsdp", "--model-size", "tiny",
        "--seq-len", "64", "--dry-run",
    )  # fmt: skip
    assert code == 0
    rank = shlex.split(out)[shlex.split(out).index("/opt/clusterctl/payload/gpt_bench.py") :]
    assert {"--framework=fsdp", "--model-size=tiny", "--seq-len=64"} <= set(rank)
    assert "-x MASTER_ADDR=" in out  # FSDP rendezvous like DDP
    assert "proof by counters" in err and "FSDP" in err and "reduce-scattered" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["--framework", "ddp", "--model-size", "2b"],
            ["--model-size", "'tiny', '124m', '350m', '1.3b', or L<layers>-H<heads>-W<width>"],
        ),
        (
            ["--framework", "ddp", "--model-size", "L4-H3-W256"],
            ["--model-size", "width 256 does not split into 3 heads", "e.g. L4-H2-W256"],
        ),
        (["--framework", "ddp", "--model-size", "L0-H4-W256"], ["--model-size", "layers must be 1 to"]),
        (["--framework", "ddp", "--model-size", "L4-H512-W256"], ["heads at least 1 and at most the width"]),
        (
            ["--framework", "horovod", "--model-size", "tiny"],
            ["gpt runs with --framework ddp or --framework fsdp"],
        ),
        (["--framework", "ddp", "--model-size", "tiny", "--seq-len", "0"], ["--seq-len"]),
    ],
)
def test_bad_gpt_options_exit_2_naming_the_fix(
    capsys: pytest.CaptureFixture[str], argv: list[str], words: list[str]
) -> None:
    code, out, err = _main(capsys, "run", "gpt", "-i", str(SANDBOX), *argv, "--dry-run")
    assert code == 2 and out == ""
    assert all(word in err for word in words), err
    assert "Traceback" not in err


def test_resnet50_refuses_fsdp(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "run", "resnet50", "-i", str(SANDBOX), "--framework", "fsdp", "--dry-run")
    assert code == 2 and out == "" and "FSDP is the gpt workload's" in err


def test_a_model_that_cannot_fit_is_refused_with_its_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    too_big = ["--model-size", "1.3b", "--batch-size", "64", "--precision", "bf16"]
    code, out, err = _main(capsys, "run", "gpt", "-i", str(H100), "--framework", "ddp", *too_big, "--dry-run")
    estimate = GptShape.named("1.3b", 1024).memory_bytes(64, "bf16", shards=1)
    assert code == 2 and out == ""
    assert f"about {estimate / 1e9:.1f} GB per device" in err and "80 GB of H100-SXM5-80GB" in err
    # Sharded over the 16 GPUs at a batch of 8, the same model fits.
    fits = ["--model-size", "1.3b", "--batch-size", "8", "--precision", "bf16", "--framework", "fsdp"]
    assert _main(capsys, "run", "gpt", "-i", str(H100), *fits, "--dry-run")[0] == 0


def test_sweep_takes_model_size_and_seq_len_lists(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(
        capsys, "sweep", "gpt", "-i", str(SANDBOX), "--gpus", "1,2", "--framework", "ddp",
        "--model-size", "tiny,124m", "--seq-len", "32,64", "--dry-run", "--json",
    )  # fmt: skip
    assert code == 0
    ranks = [
        plan["argv"][plan["argv"].index("/opt/clusterctl/payload/gpt_bench.py") :]
        for plan in strict_loads(out)
    ]
    shapes = {(a[2], a[3]) for a in ranks}
    assert shapes == {
        (f"--model-size={size}", f"--seq-len={seq}") for size in ("tiny", "124m") for seq in (32, 64)
    }
    assert len(ranks) == 8  # 4 shapes x 2 device counts


def test_an_explicit_shape_is_counted_like_a_named_one() -> None:
    # GPT-2 small spelled out is GPT-2 small; the spelling is normalised (lower case accepted).
    assert GptShape.named("L12-H12-W768", 1024) == GptShape.named("124m", 1024)
    assert _settings(model_size="l6-h8-w512").model_size == "L6-H8-W512"
    assert bench.dimensions("L6-H8-W512") == (6, 8, 512)
    with torch.device("meta"):
        model = bench.GPT(*bench.dimensions("L6-H8-W512"), 64)
    assert bench.parameter_count(model) == GptShape.named("L6-H8-W512", 64).parameters


def test_an_explicit_shape_reaches_the_payload_the_memory_refusal_and_the_report_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _main(
        capsys, "run", "gpt", "-i", str(SANDBOX), "--framework", "ddp", "--model-size", "L3-H4-W192",
        "--seq-len", "64", "--dry-run", "--json",
    )  # fmt: skip
    assert code == 0 and "--model-size=L3-H4-W192" in strict_loads(out)[0]["argv"]
    assert get_workload("gpt").config_fields(_settings(model_size="L3-H4-W192", seq_len=64)) == {
        "model_size": "L3-H4-W192",
        "seq_len": 64,
    }
    # 96 layers of width 12,288 (GPT-3 175B's shape) cannot fit one 80 GB GPU: refused with the estimate.
    big = ["--model-size", "L96-H96-W12288", "--batch-size", "1", "--precision", "bf16"]
    code, out, err = _main(capsys, "run", "gpt", "-i", str(H100), "--framework", "ddp", *big, "--dry-run")
    estimate = GptShape.named("L96-H96-W12288", 1024).memory_bytes(1, "bf16", shards=1)
    assert code == 2 and out == "" and f"about {estimate / 1e9:.1f} GB per device" in err


def test_checkpointing_keeps_one_input_per_block_and_its_refusal_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shape = GptShape.named("1.3b", 2048)
    plain = shape.memory_bytes(8, "bf16", shards=1)
    kept = shape.memory_bytes(8, "bf16", shards=1, checkpointed=True)
    s, b, w = 2048, 8, 2048
    one_layer = s * b * w * (34 + 5 * 16 * s // w)
    # Korthikanti et al. table 2: each layer keeps 2 S B W; one layer is rebuilt at a time.
    assert plain - kept == 24 * one_layer - (24 * 2 * s * b * w + one_layer)
    # 1.3b at a batch of 24 does not fit 80 GB as it is, but does with checkpointing.
    argv = ["--model-size", "1.3b", "--batch-size", "24", "--precision", "bf16", "--framework", "ddp"]
    code, _, err = _main(capsys, "run", "gpt", "-i", str(H100), *argv, "--dry-run")
    assert code == 2 and "--activation-checkpointing, or --framework fsdp" in err
    code, out, _ = _main(
        capsys, "run", "gpt", "-i", str(H100), *argv, "--activation-checkpointing", "--dry-run"
    )
    assert code == 0 and "--activation-checkpointing" in shlex.split(out)


def test_checkpointing_is_its_own_configuration_and_mfu_counts_model_flops() -> None:
    gpt = get_workload("gpt")
    on = _settings(framework="ddp", model_size="124m", seq_len=1024, activation_checkpointing=True)
    assert gpt.config_fields(on)["activation_checkpointing"] is True
    assert "activation_checkpointing" not in gpt.config_fields(_settings(model_size="124m"))
    facts = gpt.compute(on, "")
    assert facts is not None and facts.flops_per_sample == 855_166_464  # no recompute counted
    assert "recompute not counted" in facts.derivation


def test_a_checkpointed_block_recomputes_in_backward_with_the_same_gradients_and_a_falling_loss() -> None:
    tokens = torch.randint(0, 97, (2, 17), generator=torch.Generator().manual_seed(1))
    grads: dict[bool, list[torch.Tensor]] = {}
    losses: dict[bool, list[float]] = {}
    forwards: dict[bool, int] = {}
    for checkpointed in (False, True):
        torch.manual_seed(0)
        model = bench.GPT(2, 2, 32, 16, vocab=97, checkpointed=checkpointed)
        calls = [0]
        for block in model.blocks:
            original = block.body

            def counted(x: torch.Tensor, original: Any = original, calls: list[int] = calls) -> torch.Tensor:
                calls[0] += 1
                return original(x)

            block.body = counted
        losses[checkpointed], grads[checkpointed], _ = _train(model, tokens)
        forwards[checkpointed] = calls[0]
    assert forwards == {False: 2 * 4, True: 2 * 2 * 4}  # each block's body runs again in backward
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[False], grads[True], strict=True))
    assert losses[True][-1] < losses[True][0]
