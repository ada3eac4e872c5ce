"""Running a launch plan with a launcher (ssh or slurm), then judging, recording and remembering it.

``execute_plan`` is the ssh launcher's executor (mpirun in the primary's container); any launcher
becomes an executor through ``launcher_executor`` (``clusterctl.run.launchers``);
``run_benchmark`` repeats it, judges every run (pure), writes each run directory and history row.
``run_plans`` is what `clusterctl run` does: per plan, a topology snapshot of its nodes, then the
runs, each between two readings of the nodes' fabric counters (a launcher that observes the nodes
it got, slurm's, takes both itself, inside the allocation); ``run_sweep`` is what
`clusterctl sweep` does: ``run_plans``, then the report of the history.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from clusterctl.inventory import Inventory
from clusterctl.results.counters import CounterReader
from clusterctl.results.history import add_run, history_path
from clusterctl.results.record import RunRecord
from clusterctl.results.report import ReportRow, report_of
from clusterctl.run.judge import judge_run
from clusterctl.run.launchers import ExecResult, Launcher, get_launcher, run_launch
from clusterctl.run.launchers.ssh import SshLauncher
from clusterctl.run.plan import LaunchPlan
from clusterctl.run.rundir import new_run_id, write_run_dir
from clusterctl.workloads.base import Workload

OnRecord = Callable[[RunRecord, Path], None]
"""Called with each run's record and run directory as soon as the run is recorded."""


def _ignore_record(record: RunRecord, directory: Path) -> None:
    del record, directory


class Executor(Protocol):
    """Runs a plan's argv somewhere and returns what it printed."""

    def __call__(
        self, inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line: Callable[[str], None]
    ) -> ExecResult: ...


def execute_plan(
    inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line: Callable[[str], None]
) -> ExecResult:
    """Run ``plan`` with the ssh launcher: mpirun in the primary node's benchmark container.

    A run past ``timeout_s`` is killed in the container and returned with exit code 124 and the
    output it printed; Ctrl-C kills the remote mpirun too and re-raises.

    Raises:
        StepError: the primary's container is not running (`clusterctl up`).
        ConnectError: the primary's Docker engine cannot be reached.
    """
    return run_launch(SshLauncher(), inventory, plan, timeout_s=timeout_s, on_line=on_line)


def launcher_executor(launcher: Launcher) -> Executor:
    """The executor that runs each plan with ``launcher`` (``run_launch``)."""

    def execute(
        inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line: Callable[[str], None]
    ) -> ExecResult:
        return run_launch(launcher, inventory, plan, timeout_s=timeout_s, on_line=on_line)

    return execute


def run_benchmark(
    inventory: Inventory,
    plan: LaunchPlan,
    workload: Workload,
    *,
    repeats: int,
    timeout_s: float,
    runs_dir: Path,
    on_line: Callable[[str], None],
    topology_dir: Path | None = None,
    execute: Executor = execute_plan,
    on_record: OnRecord = _ignore_record,
    read_counters: CounterReader | None = None,
) -> list[tuple[RunRecord, Path]]:
    """Run ``plan`` ``repeats`` times; judge, write a run directory and a history row for each.

    With ``read_counters``, the run's nodes' fabric counters are read right before and right after
    each run, and the record carries the bytes each node moved (the proof by counters). Counters the
    execution read itself (``ExecResult.counters``, from inside a Slurm allocation) are judged
    instead, and its snapshots (``ExecResult.bundles``) replace ``topology_dir``, in the run
    directory and as the snapshot the run's findings are judged with.

    Returns:
        One (record, run directory) per repeat, in order.
    """
    # Imported on use: it pulls the collectors.
    from clusterctl.diagnostics.check import (
        bundle_findings,
        chosen_nic_findings,
        snapshot_bundles,
        snapshot_findings,
    )

    snapshot = snapshot_findings(inventory, topology_dir) if topology_dir is not None else []
    taken = snapshot_bundles(inventory, topology_dir) if topology_dir is not None else {}
    done = []
    for _ in range(repeats):
        started = datetime.now(UTC)
        nodes = [inventory.node(h.node) for h in plan.hosts]
        before = read_counters(inventory, nodes) if read_counters else None
        result = execute(inventory, plan, timeout_s=timeout_s, on_line=on_line)
        after = read_counters(inventory, nodes) if read_counters else None
        read = (before, after) if before is not None and after is not None else None
        record = judge_run(
            inventory,
            plan,
            workload,
            result.output,
            result.exit_code,
            run_id=new_run_id(workload.name, len(plan.hosts), started),
            started_at=started,
            counters=result.counters or read,
            snapshot=bundle_findings(inventory, result.bundles["topology"])
            if "topology" in result.bundles
            else snapshot,
            launcher=result.launcher,
        )
        # Each GPU's GDR and rail, judged against the NIC its channels used (warnings: validity stands).
        record.findings += chosen_nic_findings(
            inventory, result.bundles.get("topology") or taken, record.fabric.gpu_nics, record.fabric.gpu_gdr
        )
        directory = write_run_dir(
            runs_dir,
            inventory,
            plan,
            result.output,
            record,
            topology_dir,
            command=result.command,
            bundles=result.bundles,
        )
        add_run(history_path(runs_dir), record, directory)
        on_record(record, directory)
        done.append((record, directory))
    return done


def run_plans(
    inventory: Inventory,
    plans: Sequence[LaunchPlan],
    *,
    repeats: int,
    timeout_s: float,
    runs_dir: Path,
    on_line: Callable[[str], None],
    on_record: OnRecord = _ignore_record,
    preflight: bool = False,
    launcher: str | None = None,
) -> list[tuple[RunRecord, Path]]:
    """For each plan in order: snapshot the topology of its nodes, then run it ``repeats`` times.

    ``launcher`` names how the runs are started (``ssh`` or ``slurm``); None: the inventory's default.
    With ``preflight``, each plan's collective benchmark runs first, through the same launcher
    (``clusterctl.run.preflight``), and a fabric below the inventory's minimum bus bandwidth stops
    everything there (PreflightRefused).

    The snapshot (``check topology``'s bundle, taken right before the runs) goes into every run
    directory of that plan, so a result can be read against the hosts' state when it was measured.
    A launcher that observes the nodes it got (slurm) takes the snapshots and counters itself, on
    those nodes: nothing is read over SSH on the inventory's.

    Returns:
        One (record, run directory) per run, in order.

    Raises:
        InputError: ``slurm`` for an inventory without a slurm block.
        StepError, ConnectError, RunFailed: as the launcher's ``follow``.
        PreflightRefused: with ``preflight``, the collective failed or was too slow.
    """
    # Imported on use: collecting reaches the hosts over SSH (fabric, paramiko).
    from clusterctl.diagnostics.collect import collect_bundle
    from clusterctl.results.counter_reading import read_fabric_counters
    from clusterctl.run.preflight import preflight_plan, run_preflight
    from clusterctl.workloads import get_workload

    chosen = get_launcher(inventory, launcher)
    execute = launcher_executor(chosen)
    read_counters = None if chosen.observes_nodes else read_fabric_counters
    if preflight:  # every collective's plan is valid before anything runs
        for plan in plans:
            preflight_plan(inventory, plan)
    done: list[tuple[RunRecord, Path]] = []
    for plan in plans:
        if preflight:
            run_preflight(
                inventory,
                plan,
                timeout_s=timeout_s,
                runs_dir=runs_dir,
                on_line=on_line,
                on_record=on_record,
                execute=execute,
                read_counters=read_counters,
            )
        with tempfile.TemporaryDirectory(prefix="clusterctl-topology-") as snapshot:
            if not chosen.observes_nodes:
                collect_bundle(inventory, [inventory.node(h.node) for h in plan.hosts], Path(snapshot))
            done += run_benchmark(
                inventory,
                plan,
                get_workload(plan.options.workload),
                repeats=repeats,
                timeout_s=timeout_s,
                runs_dir=runs_dir,
                on_line=on_line,
                topology_dir=None if chosen.observes_nodes else Path(snapshot),
                execute=execute,
                on_record=on_record,
                read_counters=read_counters,
            )
    return done


def run_sweep(
    inventory: Inventory,
    plans: Sequence[LaunchPlan],
    *,
    repeats: int,
    timeout_s: float,
    runs_dir: Path,
    on_line: Callable[[str], None],
    on_record: OnRecord = _ignore_record,
    launcher: str | None = None,
) -> tuple[list[tuple[RunRecord, Path]], list[ReportRow], list[str]]:
    """``run_plans`` (with ``launcher``), then the report of ``runs_dir``'s whole history (these runs and
    earlier ones).

    Returns:
        The runs, as ``run_plans`` returns them, the report rows, and the history rows left out of the
        report (``read_history``).
    """
    done = run_plans(
        inventory,
        plans,
        repeats=repeats,
        timeout_s=timeout_s,
        runs_dir=runs_dir,
        on_line=on_line,
        on_record=on_record,
        launcher=launcher,
    )
    rows, skipped = report_of(runs_dir)
    return done, rows, skipped
