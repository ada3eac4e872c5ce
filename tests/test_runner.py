"""The library half of `run`, `sweep` and `report`: records reach the caller as they are made, and the
report of a runs directory is built from its history. The executor is a stand-in for the container's
exec (the seam ``run_benchmark`` takes); everything else (judging, run directories, history) is real."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir
from clusterctl.results.history import history_path, load_runs
from clusterctl.results.record import RunRecord
from clusterctl.results.report import report_of
from clusterctl.run.plan import LaunchPlan, plan_run
from clusterctl.run.runner import ExecResult, run_benchmark
from clusterctl.run.sweep import plan_sweep
from clusterctl.workloads import get_workload

PAPER = data_dir("inventories") / "paper-c4140.yml"
# The workload the paper image runs (resnet50 is refused there when the plan is built).
WORKLOAD = "tf_cnn_benchmarks"


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return load_inventory(PAPER)


def _failed_exec(inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line) -> ExecResult:
    """mpirun that could not start: exit 1 and one line of output."""
    on_line("mpirun: no container")
    return ExecResult(1, "mpirun: no container\n")


def _run_failing(
    inventory: Inventory, plan: LaunchPlan, runs_dir: Path, **options
) -> list[tuple[RunRecord, Path]]:
    """``plan`` run and recorded into ``runs_dir`` with an mpirun that cannot start."""
    return run_benchmark(
        inventory,
        plan,
        get_workload(WORKLOAD),
        timeout_s=10,
        runs_dir=runs_dir,
        on_line=lambda line: None,
        execute=_failed_exec,
        **options,
    )


def test_each_record_is_handed_over_as_soon_as_it_is_recorded(inventory: Inventory, tmp_path: Path) -> None:
    plan = plan_run(inventory, WORKLOAD, nodes=1, steps=5)
    seen: list[tuple[RunRecord, Path, int]] = []

    def on_record(record: RunRecord, directory: Path) -> None:
        # The history already holds this run when the caller hears of it.
        seen.append((record, directory, len(load_runs(history_path(tmp_path)))))

    done = _run_failing(inventory, plan, tmp_path, repeats=2, on_record=on_record)
    assert [(r.run_id, d) for r, d, _ in seen] == [(r.run_id, d) for r, d in done]
    assert [count for _, _, count in seen] == [1, 2]
    assert all(not r.valid and r.exit_code == 1 for r, _ in done)


def test_report_of_reads_the_history_of_a_runs_directory(inventory: Inventory, tmp_path: Path) -> None:
    assert report_of(tmp_path) == ([], [])
    _run_failing(inventory, plan_run(inventory, WORKLOAD, nodes=1), tmp_path, repeats=1)
    [row], skipped = report_of(tmp_path)
    assert skipped == []
    assert (row.config.workload, row.devices, row.runs, row.invalid_runs) == (WORKLOAD, 4, 0, 1)


def test_plan_sweep_gives_one_launch_plan_per_setting_and_device_count(inventory: Inventory) -> None:
    plans = plan_sweep(inventory, WORKLOAD, [1, 4, 8], {"precision": ["fp16", "fp32"]})
    got = [(p.options.settings.precision, sum(h.slots for h in p.hosts), len(p.hosts)) for p in plans]
    assert got == [
        ("fp16", 1, 1),
        ("fp16", 4, 1),
        ("fp16", 8, 2),
        ("fp32", 1, 1),
        ("fp32", 4, 1),
        ("fp32", 8, 2),
    ]


@pytest.mark.parametrize("taken_by", ["runner", "launch"])
def test_the_runs_topology_snapshot_is_judged_and_settled_by_its_log(
    inventory: Inventory, tmp_path: Path, taken_by: str
) -> None:
    """A snapshot whose c4140-1 has no peer-memory module, a run whose NCCL log shows GDRDMA channels:
    the run's findings say the log settled it, and the snapshot is kept in the run directory. The
    same whether the runner took the snapshot (ssh) or the launch did, inside its allocation (slurm)."""
    from clusterctl.diagnostics.bundle import write_bundle
    from tests.fixtures import fixture_text
    from tests.test_diag_collect import FIXTURE_NODE, _bundle

    node_bundle = {"c4140-1": _bundle("c4140-1", FIXTURE_NODE)}
    snapshot = write_bundle(tmp_path / "snapshot", node_bundle) if taken_by == "runner" else None
    log = fixture_text("nccl_logs/nccl-issue707-a100-channels-net-ib-gdrdma-partial.txt")

    def gdr_exec(inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line) -> ExecResult:
        if taken_by == "launch":
            return ExecResult(0, log, bundles={"topology": node_bundle})
        return ExecResult(0, log)

    plan = plan_run(inventory, WORKLOAD, nodes=2, steps=5)
    [(record, directory)] = run_benchmark(
        inventory,
        plan,
        get_workload(WORKLOAD),
        repeats=1,
        timeout_s=10,
        runs_dir=tmp_path / "runs",
        on_line=lambda line: None,
        execute=gdr_exec,
        topology_dir=snapshot,
    )
    codes = {(f.severity, f.code, f.node) for f in record.findings}
    assert ("info", "peermem-settled-by-log", "c4140-1") in codes
    assert not [c for c in codes if c[1] == "peermem-missing"]
    assert (directory / "topology" / "c4140-1").is_dir()
