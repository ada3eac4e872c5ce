"""The payload's speed options: compile only under DDP, window-edge syncs, tuned DDP, bf16 refusal."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from clusterctl.inventory import load_inventory
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.helpers.resnet50_payload import bench

ROOT = Path(__file__).resolve().parents[1]


def _args(*argv: str) -> argparse.Namespace:
    return bench.parse_args(list(argv))


def test_compile_is_honoured_under_ddp_and_declined_with_a_note_under_horovod() -> None:
    assert bench.compile_wanted(_args("--framework=ddp", "--compile")) == (True, None)
    compiled, note = bench.compile_wanted(_args("--framework=horovod", "--compile"))
    assert compiled is False
    assert note and "--framework ddp" in note
    assert bench.compile_wanted(_args("--framework=horovod")) == (False, None)


def test_the_device_is_synchronised_only_at_window_edges() -> None:
    calls: list[str] = []
    edges = list(bench.timed_windows(lambda: calls.append("step"), 7, 3, lambda: calls.append("sync")))
    assert [step for step, _ in edges] == [3, 6, 7]
    # one sync before the clock starts, then one per window (3, 6 and the last step)
    assert calls == ["sync", *["step"] * 3, "sync", *["step"] * 3, "sync", "step", "sync"]
    assert [seconds for _, seconds in edges] == sorted(seconds for _, seconds in edges)


def test_bf16_is_refused_on_a_gpu_without_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU here: the two CUDA queries are answered as a V100 answers them.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla V100-SXM2-16GB")
    with pytest.raises(SystemExit, match=r"bf16 is not supported on Tesla V100.*use --precision fp16"):
        bench.autocast_dtype("bf16", torch.device("cuda", 0))
    assert bench.autocast_dtype("fp16", torch.device("cuda", 0)) == torch.float16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_is_wrapped_with_bucket_views_no_buffer_broadcast_and_a_static_graph() -> None:
    args = _args("--framework=ddp", f"--master-port={_free_port()}", "--bucket-cap-mb=50")
    trainer = bench.Trainer(args)
    try:
        ddp, optimizer = trainer.wrap(torch.nn.Linear(4, 2), args)
        assert ddp.gradient_as_bucket_view is True
        assert ddp.broadcast_buffers is False
        assert ddp.static_graph is True
        assert ddp.bucket_bytes_cap == 50 * 1024 * 1024
        assert isinstance(optimizer, torch.optim.SGD)
        assert trainer.slowest(1.25) == 1.25  # one rank: its own time
        compiled, _ = trainer.wrap(torch.nn.Linear(4, 2), args, compiled=True)
        assert compiled.static_graph is False  # DDPOptimizer splits a compiled graph itself
    finally:
        trainer.shutdown()


def test_the_sgd_update_runs_as_asked_and_auto_is_fused_on_a_gpu_only() -> None:
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert bench.optimizer_impl("auto", gpu) == "fused" and bench.optimizer_impl("auto", cpu) == "for-loop"
    assert bench.optimizer_impl("foreach", gpu) == "foreach"
    for impl, foreach, fused in (
        ("for-loop", False, False),
        ("foreach", True, False),
        ("fused", False, True),
    ):
        model = torch.nn.Linear(4, 2)
        optimizer = bench._sgd(model.parameters(), 0.1, impl)
        assert (optimizer.defaults["foreach"], optimizer.defaults["fused"]) == (foreach, fused), impl
        before = model.weight.detach().clone()
        model(torch.ones(3, 4)).sum().backward()
        optimizer.step()  # each runs here (torch's fused SGD has a CPU kernel too) and moves the weights
        assert not torch.equal(before, model.weight), impl


def test_compile_modes_reach_the_parser_and_the_default_is_torch_s() -> None:
    assert _args().compile_mode == "default" and _args().optimizer_impl == "auto"
    assert _args("--compile", "--compile-mode=reduce-overhead").compile_mode == "reduce-overhead"
    with pytest.raises(SystemExit):
        _args("--compile-mode=fastest")


def test_a_horovod_run_asked_to_compile_gets_an_info_finding_not_a_failure() -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    workload = get_workload("resnet50")
    plan = build_job(inventory, run_options(inventory, "resnet50", nodes=1), workload)
    s = plan.options.settings
    assert s.framework == "horovod" and s.xla, "the shipped modern inventory asks for Horovod + compile"
    result = {
        "model": "resnet50",
        "framework": s.framework,
        "batch_size": s.batch_size,
        "world_size": plan.world_size,
        "precision": s.precision,
        "compile": False,
        "total_images_per_sec": 1.0,
        "images_per_sec_per_device": 1.0,
    }
    findings = workload.sanity("CLUSTERCTL_RESULT " + json.dumps(result), plan)
    assert [(f.code, f.severity) for f in findings] == [("compile-not-used", "info")]
    result["compile"] = True
    assert workload.sanity("CLUSTERCTL_RESULT " + json.dumps(result), plan) == []


def test_the_inventory_reaches_the_payload_s_allreduce_options() -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    workload = get_workload("resnet50")

    def argv(**overrides: Any) -> list[str]:
        return build_job(
            inventory, run_options(inventory, "resnet50", nodes=1, **overrides), workload
        ).rank_argv

    assert "--fp16-allreduce" in argv(framework="horovod", fp16_allreduce=True)
    assert "--fp16-allreduce" not in argv(framework="horovod")
    ddp = argv(framework="ddp", fp16_allreduce=True, bucket_cap_mb=50)
    assert "--bucket-cap-mb=50" in ddp and "--fp16-allreduce" not in ddp
    parsed = bench.parse_args(["--framework=horovod", "--fp16-allreduce"])
    assert parsed.fp16_allreduce is True


def test_fp32_runs_as_tf32_only_where_the_gpu_has_tf32_tensor_cores() -> None:
    assert bench.use_tf32("fp32", (9, 0)) and bench.use_tf32("fp32", (8, 0))  # H100, A100
    assert not bench.use_tf32("fp32", (7, 0))  # V100: no TF32
    assert not bench.use_tf32("fp32", None)  # CPU
    assert not bench.use_tf32("bf16", (9, 0))  # autocast computes in bf16 already
