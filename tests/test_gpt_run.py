"""Real gpt runs: the payload under this host's Open MPI (1 and 2 CPU ranks, DDP and FSDP over Gloo),
judged and written as ``clusterctl run`` does, then reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.cli import main
from clusterctl.results.record import RunRecord
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.gpt_arith import GptShape
from tests.helpers.localrun import TINY_GPT, LocalMpirun, local_inventory
from tests.helpers.strictjson import report_rows

CASES = [("ddp", 1), ("ddp", 2), ("fsdp", 1), ("fsdp", 2)]


def _run(runs_dir: Path, framework: str, nodes: int, **more: Any) -> RunRecord:
    inventory = local_inventory()
    plan = build_job(
        inventory,
        run_options(inventory, "gpt", nodes=nodes, framework=framework, **TINY_GPT, **more),
        get_workload("gpt"),
    )
    [(record, _)] = run_plans(
        run_context(inventory, [plan], launcher=LocalMpirun(), timeout_s=300, runs_dir=runs_dir)
    )
    return record


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def runs(runs_dir: Path) -> dict[tuple[str, int], RunRecord]:
    return {(framework, nodes): _run(runs_dir, framework, nodes) for framework, nodes in CASES}


@pytest.mark.parametrize(("framework", "ranks"), CASES)
def test_a_tiny_gpt_trains_valid_with_tokens_per_second_and_mfu(
    runs: dict[tuple[str, int], RunRecord], framework: str, ranks: int
) -> None:
    record = runs[(framework, ranks)]
    assert record.valid, [f.message for f in record.findings]
    assert record.world_size == ranks and record.config.framework == framework
    assert (record.config.model_size, record.config.seq_len) == ("tiny", 32)
    total = record.metrics["total_tokens_per_sec"]
    per_device = record.metrics["tokens_per_sec_per_device"]
    assert total.unit == "tokens/s" and total.value > 0
    assert per_device.value == pytest.approx(total.value / ranks, rel=1e-3)
    assert record.flops is not None and record.flops.peak_source == "measured"
    assert record.flops.flops_per_sample == GptShape.named("tiny", 32).flops_per_token()
    # No upper bound: the CPU peak is measured for 0.4 s on a shared machine, under whatever load is there.
    assert record.flops.mfu is not None and record.flops.mfu > 0
    assert record.breakdown is not None and len(record.breakdown) == ranks


def test_fsdp_on_one_rank_is_warned(runs: dict[tuple[str, int], RunRecord]) -> None:
    warned = [f.code for f in runs[("fsdp", 1)].findings if f.severity == "warning"]
    assert "fsdp-one-rank" in warned
    assert "fsdp-one-rank" not in [f.code for f in runs[("fsdp", 2)].findings]


def test_the_report_groups_gpt_by_size_and_sequence_with_mfu(
    runs: dict[tuple[str, int], RunRecord], runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--runs-dir", str(runs_dir), "--json"]) == 0
    rows = report_rows(capsys.readouterr().out)
    keys = {(r["config"]["framework"], r["devices"]) for r in rows}
    assert keys == set(CASES)
    for row in rows:
        assert (row["config"]["model_size"], row["config"]["seq_len"]) == ("tiny", 32)
        assert row["unit"] == "tokens/s" and row["median"] > 0 and row["mfu"] > 0
    assert main(["report", "--runs-dir", str(runs_dir), "--wide"]) == 0
    assert "gpt tiny/32" in capsys.readouterr().out


def test_fsdp_with_activation_checkpointing_trains_valid_with_a_falling_loss(tmp_path: Path) -> None:
    record = _run(tmp_path, "fsdp", 2, activation_checkpointing=True)
    assert record.valid, [f.message for f in record.findings]  # the loss fell: loss_findings found nothing
    assert record.config.activation_checkpointing is True
    assert record.metrics["total_tokens_per_sec"].value > 0
    [output] = tmp_path.glob("*/output.log")
    log = output.read_text()
    assert "activation checkpointing" in log and '"activation_checkpointing": true' in log
