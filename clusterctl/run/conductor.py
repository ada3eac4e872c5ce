"""The conductor: the one place a job is run, judged, recorded and remembered.

``run_plans`` is what `clusterctl run` does with a ``RunContext`` (``clusterctl.run.context``): for
each plan, its collective first with preflight (refused below the inventory's minimum), then the plan
``repeats`` times. Every run goes the same way whatever the launcher: start, follow to the deadline
(cancel on timeout or Ctrl-C), collect (output, command, the counters and snapshots the launch took
of its nodes), judge (pure), write the run directory, add the history row, hand the record over.
``run_sweep`` is what `clusterctl sweep` does: ``run_plans``, then the report of the history.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.data.caches import drop_caches, require_droppable
from clusterctl.data.deliver import require_dataset
from clusterctl.inventory import Inventory, Node
from clusterctl.results.baselines import baselines_for
from clusterctl.results.history import add_run, history_path
from clusterctl.results.record import TIMEOUT_EXIT_CODE, RunRecord
from clusterctl.results.report import ReportRow, report_of
from clusterctl.results.traces import shown
from clusterctl.run.backends import Collected
from clusterctl.run.context import RunContext
from clusterctl.run.judge import judge_collected
from clusterctl.run.preflight import PreflightRefused, preflight_minimum, refusal
from clusterctl.run.rundir import new_run_dir, new_run_id, write_run_dir
from clusterctl.workloads.base import Workload
from clusterctl.workloads.job import DDP_MASTER_PORT, Job


def run_plans(context: RunContext) -> list[tuple[RunRecord, Path]]:
    """For each plan in order: its collective run first (with preflight), then the plan ``repeats`` times.

    Returns:
        One (record, run directory) per run of the plans (the collective runs are recorded, not
        returned), in order.

    Raises:
        StepError, ConnectError, RunFailed: as the launcher's ``start`` and ``follow``.
        PreflightRefused: with preflight, a collective failed or was too slow; nothing runs after it.
    """
    check_datasets(context.inventory, context.plans, tfrecords=context.workload.reads_tfrecords)
    for plan in context.plans:
        if plan.options.settings.drop_caches:
            require_droppable(context.inventory, _nodes(context.inventory, plan))
    done: list[tuple[RunRecord, Path]] = []
    for i, plan in enumerate(context.plans):
        if context.preflight is not None:
            for check in context.preflight.plans[i]:
                _run_preflight(context, check, context.preflight.workload)
        done += _run_repeats(context, plan, context.workload, context.repeats)
    return done


def check_datasets(inventory: Inventory, plans: Sequence[Job], *, tfrecords: bool = False) -> None:
    """Refuse, before the first launch, a real-data plan whose dataset a node of it lacks (``require_dataset``;
    ``tfrecords``: the workload reads run.data's TFRecord shards, unless the plan names run.data_dir)."""
    for plan in plans:
        s = plan.options.settings
        if s.data != "synthetic":
            require_dataset(
                inventory, _nodes(inventory, plan), s.data, tfrecords=tfrecords and not s.data_dir
            )


def _nodes(inventory: Inventory, plan: Job) -> list[Node]:
    """The inventory's nodes that ``plan`` runs on."""
    by_name = {node.name: node for node in inventory.nodes}
    return [by_name[h.node] for h in plan.hosts]


def run_sweep(context: RunContext) -> tuple[list[tuple[RunRecord, Path]], list[ReportRow], list[str]]:
    """``run_plans``, then the report of the runs directory's whole history (these runs and earlier ones).

    Returns:
        The runs, as ``run_plans`` returns them, the report rows, and the run directories left out of
        the report (``load_runs``).
    """
    done = run_plans(context)
    rows, skipped = report_of(context.runs_dir)
    return done, rows, skipped


def _run_preflight(context: RunContext, plan: Job, workload: Workload) -> RunRecord:
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
    context: RunContext, plan: Job, workload: Workload, repeats: int
) -> list[tuple[RunRecord, Path]]:
    """Run ``plan`` ``repeats`` times; judge each run, write its run directory and history row, and
    hand the record over.

    The counters the launch read before and after the run are judged (the proof by counters), and
    its snapshot before the run (``topology``) is judged with the run and written to its directory.
    """
    inventory = context.inventory
    done = []
    for _ in range(repeats):
        cold = plan.options.settings.drop_caches
        if cold:
            drop_caches(inventory, _nodes(inventory, plan))
        started = datetime.now(UTC)
        run_id = new_run_id(workload.name, len(plan.hosts), started)
        launched = _with_port(context, plan, run_id)
        exit_code, got = _launch(context, launched)
        directory = new_run_dir(context.runs_dir, run_id)  # its name is the run's id, before it is judged
        judged = judge_collected(
            inventory,
            launched,
            workload,
            got,
            exit_code,
            run_id=directory.name,
            started_at=started,
            launcher=context.backend.name,
            starter=context.backend.starter,
            cache_dropped=cold,
        )
        record = judged.record
        write_run_dir(
            directory,
            inventory,
            launched,
            judged.output,
            record,
            command=got.command,
            bundles=got.bundles,
            telemetry=judged.telemetry,
            traces=judged.traces,
        )
        add_run(history_path(context.runs_dir), record, directory)
        context.on_record(record, directory)
        done.append((record, directory))
    return done


def _with_port(context: RunContext, plan: Job, run_id: str) -> Job:
    """``plan`` with the run's own rendezvous port (DDP, FSDP), as its backend chooses it
    (``Backend.prepare``); a job without one, or whose port its caller already chose (not the job's
    default), unchanged."""
    if plan.rendezvous_port != DDP_MASTER_PORT:
        return plan
    return context.backend.prepare(context.inventory, plan, run_id)


def _launch(context: RunContext, plan: Job) -> tuple[int, Collected]:
    """Start ``plan`` with the context's launcher, follow it to its end, and collect it: its exit code
    and what it left.

    A run past the context's ``timeout_s`` is cancelled and gets ``TIMEOUT_EXIT_CODE``; Ctrl-C (or any
    error while following) cancels it and re-raises.
    """
    launch = context.backend.start(context.inventory, plan)

    def on_line(line: str) -> None:  # a trace (run --trace) is shown as one short line, not as base64
        if (short := shown(line)) is not None:
            context.on_line(short)

    try:
        code = launch.follow(on_line, time.monotonic() + context.timeout_s)
    except BaseException:
        launch.cancel()
        raise
    if code is None:
        launch.cancel()
    return TIMEOUT_EXIT_CODE if code is None else code, launch.collect()
