"""The library half of `run`, `sweep` and `report`: records reach the caller as they are made, and the
report of a runs directory is built from its history. The launcher is a stand-in (``tests.helpers.localrun.Ended``,
given to ``run_context``); everything else (judging, run directories, history) is real."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir
from clusterctl.results.history import load_runs
from clusterctl.results.record import TIMEOUT_EXIT_CODE, LauncherName, RunRecord
from clusterctl.results.report import report_of
from clusterctl.run.backends import Collected
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.run.preflight import PreflightRefused
from clusterctl.run.sweep import plan_sweep
from clusterctl.workloads.job import Job
from tests.helpers.localrun import Described, Ended

PAPER = data_dir("inventories") / "paper-c4140.yml"
# The workload the paper image runs (resnet50 is refused there when the plan is built).
WORKLOAD = "tf_cnn_benchmarks"


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return load_inventory(PAPER)


# mpirun that could not start: exit 1 and one line of output.
FAILED = Ended(1, "mpirun: no container\n")


def _run_failing(inventory: Inventory, plan: Job, runs_dir: Path, **options) -> list[tuple[RunRecord, Path]]:
    """``plan`` run and recorded into ``runs_dir`` with an mpirun that cannot start."""
    return run_plans(
        run_context(inventory, [plan], launcher=FAILED, timeout_s=10, runs_dir=runs_dir, **options)
    )


def test_each_record_is_handed_over_as_soon_as_it_is_recorded(inventory: Inventory, tmp_path: Path) -> None:
    plan = plan_run(inventory, WORKLOAD, nodes=1, steps=5)
    seen: list[tuple[RunRecord, Path, int]] = []

    def on_record(record: RunRecord, directory: Path) -> None:
        # The history already holds this run when the caller hears of it.
        seen.append((record, directory, len(load_runs(tmp_path).runs)))

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


@pytest.mark.parametrize("launcher", ["ssh", "slurm"])
def test_the_runs_topology_snapshot_is_judged_and_settled_by_its_log(
    inventory: Inventory, tmp_path: Path, launcher: LauncherName
) -> None:
    """A snapshot whose c4140-1 has no peer-memory module, a run whose NCCL log shows GDRDMA channels:
    the run's findings say the log settled it, and the snapshot is kept in the run directory. The
    same whichever launcher took the snapshot (ssh over SSH, slurm inside its allocation)."""
    from tests.fixtures import fixture_text
    from tests.helpers.topology import FIXTURE_NODE, topology_bundle

    node_bundle = {"c4140-1": topology_bundle("c4140-1", FIXTURE_NODE)}
    log = fixture_text("nccl_logs/nccl-issue707-a100-channels-net-ib-gdrdma-partial.txt")
    gdr = Ended(0, log, name=launcher, bundles={"topology": node_bundle})

    plan = plan_run(inventory, WORKLOAD, nodes=2, steps=5)
    [(record, directory)] = run_plans(
        run_context(inventory, [plan], launcher=gdr, timeout_s=10, runs_dir=tmp_path / "runs")
    )
    codes = {(f.severity, f.code, f.node) for f in record.findings}
    assert ("info", "peermem-settled-by-log", "c4140-1") in codes
    assert not [c for c in codes if c[1] == "peermem-missing"]
    assert (directory / "topology" / "c4140-1").is_dir()


class _Stuck(Described):
    """A launcher whose launch never ends by itself: ``follow`` gives None (deadline) or raises ``raises``."""

    name: LauncherName = "ssh"

    def __init__(self, raises: type[BaseException] | None = None) -> None:
        self.raises, self.cancelled = raises, 0

    def start(self, inventory: Inventory, plan: Job) -> _Stuck:
        return self

    def follow(self, on_line, deadline: float) -> int | None:
        if self.raises:
            raise self.raises
        on_line("still running")
        return None

    def cancel(self) -> None:
        self.cancelled += 1

    def collect(self) -> Collected:
        return Collected("still running\n", "mpirun x")


def test_a_run_past_its_deadline_is_cancelled_and_recorded_with_the_timeout_exit_code(
    inventory: Inventory, tmp_path: Path
) -> None:
    stuck = _Stuck()
    plan = plan_run(inventory, WORKLOAD, nodes=1, steps=5)
    [(record, directory)] = run_plans(
        run_context(inventory, [plan], launcher=stuck, timeout_s=1, runs_dir=tmp_path)
    )
    assert stuck.cancelled == 1
    assert record.exit_code == TIMEOUT_EXIT_CODE == 124 and not record.valid
    assert (directory / "command.txt").read_text() == "mpirun x\n"


def test_ctrl_c_cancels_the_launch_and_records_nothing(inventory: Inventory, tmp_path: Path) -> None:
    stuck = _Stuck(raises=KeyboardInterrupt)
    plan = plan_run(inventory, WORKLOAD, nodes=1, steps=5)
    with pytest.raises(KeyboardInterrupt):
        run_plans(run_context(inventory, [plan], launcher=stuck, timeout_s=1, runs_dir=tmp_path))
    assert stuck.cancelled == 1
    assert load_runs(tmp_path).runs == []


def test_preflight_runs_each_collective_first_and_a_failed_one_stops_everything(tmp_path: Path) -> None:
    """Through the same launcher: the collective (allreduce on CPU nodes) of the first plan runs and
    fails, so neither model plan starts; the collective's run is recorded."""
    sandbox = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    plans = [plan_run(sandbox, "resnet50", nodes=n) for n in (1, 2)]
    context = run_context(sandbox, plans, launcher=FAILED, preflight=True, timeout_s=10, runs_dir=tmp_path)
    assert context.preflight is not None and context.preflight.workload.name == "allreduce"
    assert [(p.options.workload, len(p.hosts)) for p, _ in context.in_order()] == [
        ("allreduce", 1), ("resnet50", 1), ("allreduce", 2), ("resnet50", 2)
    ]  # fmt: skip
    with pytest.raises(PreflightRefused, match="preflight allreduce on 1 node"):
        run_plans(context)
    assert [r.config.workload for r in load_runs(tmp_path).runs] == ["allreduce"]
