"""The conductor: the one place a launch plan is run, judged, recorded and remembered.

``run_plans`` is what `clusterctl run` does with a ``RunContext`` (``clusterctl.run.context``): for
each plan, its collective first with preflight (refused below the inventory's minimum), then the plan
``repeats`` times. Every run goes the same way whatever the launcher: start, follow to the deadline
(cancel on timeout or Ctrl-C), collect (output, command, the counters and snapshots the launch took
of its nodes), judge (pure), write the run directory, add the history row, hand the record over.
``run_sweep`` is what `clusterctl sweep` does: ``run_plans``, then the report of the history.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.results.baselines import baselines_for
from clusterctl.results.history import add_run, history_path
from clusterctl.results.record import TIMEOUT_EXIT_CODE, RunRecord
from clusterctl.results.report import ReportRow, report_of
from clusterctl.run.context import RunContext
from clusterctl.run.judge import judge_run
from clusterctl.run.launchers import Collected
from clusterctl.run.plan import LaunchPlan
from clusterctl.run.preflight import PreflightRefused, preflight_minimum, refusal
from clusterctl.run.rundir import new_run_id, write_run_dir
from clusterctl.workloads.base import Workload


def run_plans(context: RunContext) -> list[tuple[RunRecord, Path]]:
    """For each plan in order: its collective run first (with preflight), then the plan ``repeats`` times.

    Returns:
        One (record, run directory) per run of the plans (the collective runs are recorded, not
        returned), in order.

    Raises:
        StepError, ConnectError, RunFailed: as the launcher's ``start`` and ``follow``.
        PreflightRefused: with preflight, a collective failed or was too slow; nothing runs after it.
    """
    done: list[tuple[RunRecord, Path]] = []
    for i, plan in enumerate(context.plans):
        if context.preflight is not None:
            _run_preflight(context, context.preflight.plans[i], context.preflight.workload)
        done += _run_repeats(context, plan, context.workload, context.repeats)
    return done


def run_sweep(context: RunContext) -> tuple[list[tuple[RunRecord, Path]], list[ReportRow], list[str]]:
    """``run_plans``, then the report of the runs directory's whole history (these runs and earlier ones).

    Returns:
        The runs, as ``run_plans`` returns them, the report rows, and the run directories left out of
        the report (``load_runs``).
    """
    done = run_plans(context)
    rows, skipped = report_of(context.runs_dir)
    return done, rows, skipped


def _run_preflight(context: RunContext, plan: LaunchPlan, workload: Workload) -> RunRecord:
    """Run the collective ``plan`` once, record it, and refuse when ``refusal`` says so.

    Raises:
        PreflightRefused: the collective failed or its bus bandwidth is below the minimum
            (``preflight_minimum``: the inventory's, else the matching baseline's floor).
    """
    [(record, _)] = _run_repeats(context, plan, workload, 1)
    minimum, source = preflight_minimum(context.inventory, len(plan.hosts), baselines_for(context.inventory))
    reason = refusal(record, minimum, source)
    if reason:
        raise PreflightRefused(reason)
    return record


def _run_repeats(
    context: RunContext, plan: LaunchPlan, workload: Workload, repeats: int
) -> list[tuple[RunRecord, Path]]:
    """Run ``plan`` ``repeats`` times; judge each run, write its run directory and history row, and
    hand the record over.

    The counters the launch read before and after the run are judged (the proof by counters), and
    its snapshot before the run (``topology``) is judged with the run and written to its directory.
    """
    # Imported on use: it pulls the collectors.
    from clusterctl.diagnostics.check import bundle_findings, chosen_nic_findings

    inventory = context.inventory
    done = []
    for _ in range(repeats):
        started = datetime.now(UTC)
        exit_code, got = _launch(context, plan)
        topology = got.bundles.get("topology", {})
        record = judge_run(
            inventory,
            plan,
            workload,
            got.output,
            exit_code,
            run_id=new_run_id(workload.name, len(plan.hosts), started),
            started_at=started,
            counters=got.counters,
            snapshot=bundle_findings(inventory, topology) if "topology" in got.bundles else [],
            launcher=context.launcher.name,
        )
        # Each GPU's GDR and rail, judged against the NIC its channels used (warnings: validity stands).
        record.findings += chosen_nic_findings(
            inventory, topology, record.fabric.gpu_nics, record.fabric.gpu_gdr
        )
        directory = write_run_dir(
            context.runs_dir, inventory, plan, got.output, record, command=got.command, bundles=got.bundles
        )
        add_run(history_path(context.runs_dir), record, directory)
        context.on_record(record, directory)
        done.append((record, directory))
    return done


def _launch(context: RunContext, plan: LaunchPlan) -> tuple[int, Collected]:
    """Start ``plan`` with the context's launcher, follow it to its end, and collect it: its exit code
    and what it left.

    A run past the context's ``timeout_s`` is cancelled and gets ``TIMEOUT_EXIT_CODE``; Ctrl-C (or any
    error while following) cancels it and re-raises.
    """
    launch = context.launcher.start(context.inventory, plan)
    try:
        code = launch.follow(context.on_line, time.monotonic() + context.timeout_s)
    except BaseException:
        launch.cancel()
        raise
    if code is None:
        launch.cancel()
    return TIMEOUT_EXIT_CODE if code is None else code, launch.collect()
