"""The run context: what the conductor needs for `run` and `sweep`, resolved once.

``run_context`` takes the jobs and the command's settings and resolves, before anything
runs, the backend (by name, or the inventory's default), the workload the plans run and, with
preflight, every plan's collective plan and workload; the conductor (``clusterctl.run.conductor``) and
`--dry-run` read them from the ``RunContext``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.results.record import LAUNCHERS, RunRecord
from clusterctl.run.backends import Backend
from clusterctl.run.preflight import preflight_plans
from clusterctl.workloads import get_workload
from clusterctl.workloads.base import Workload
from clusterctl.workloads.job import Job

OnRecord = Callable[[RunRecord, Path], None]
"""Called with each run's record and run directory as soon as the run is recorded."""


def _ignore_line(line: str) -> None:
    del line


def _ignore_record(record: RunRecord, directory: Path) -> None:
    del record, directory


@dataclass(frozen=True)
class Preflight:
    """The collective runs before each plan (`run --preflight`): their workload and, per plan, its
    collective plans (one allreduce; FSDP's all-gather and reduce-scatter)."""

    workload: Workload
    plans: tuple[tuple[Job, ...], ...]


@dataclass(frozen=True)
class RunContext:
    """Everything a run needs, resolved: the inventory, the jobs in order, the workload they run, the
    backend, the preflight (None: none), where runs are recorded, how long one may take, how many
    times each plan runs, and who hears each output line and each record."""

    inventory: Inventory
    plans: tuple[Job, ...]
    workload: Workload
    backend: Backend
    runs_dir: Path
    timeout_s: float
    repeats: int = 1
    preflight: Preflight | None = None
    on_line: Callable[[str], None] = _ignore_line
    on_record: OnRecord = _ignore_record

    def in_order(self) -> list[tuple[Job, Workload]]:
        """Every plan and the workload it runs, in the order the runs start: with preflight, each plan's
        collective first."""
        runs = [(plan, self.workload) for plan in self.plans]
        if self.preflight is None:
            return runs
        workload = self.preflight.workload
        return [
            step
            for checks, run in zip(self.preflight.plans, runs, strict=True)
            for step in (*((check, workload) for check in checks), run)
        ]


def get_backend(inventory: Inventory, name: str | None) -> Backend:
    """The backend called ``name`` (``--launcher``); None: the inventory's default (``slurm`` when its
    slurm block says so).

    Raises:
        InputError: an unknown name, or ``slurm`` for an inventory without a slurm block.
    """
    if name is None:
        name = "slurm" if inventory.slurm is not None and inventory.slurm.default else "ssh"
    if name == "ssh":
        from clusterctl.run.backends.ssh import SshBackend  # SSH (fabric, paramiko): on use

        return SshBackend()
    if name == "slurm":
        if inventory.slurm is None:
            where = f" {inventory.source}" if inventory.source else ""
            raise InputError(
                f"--launcher slurm: the inventory{where} has no slurm block. Fix: add one (login node, "
                "partition, runtime; `clusterctl inventory schema` describes it), or use --launcher ssh."
            )
        from clusterctl.run.backends.slurm import SlurmBackend

        return SlurmBackend()
    raise InputError(f"--launcher {name!r}: use one of {', '.join(LAUNCHERS)}.")


def run_context(
    inventory: Inventory,
    plans: Sequence[Job],
    *,
    launcher: Backend | str | None = None,
    runs_dir: Path,
    timeout_s: float,
    repeats: int = 1,
    preflight: bool = False,
    on_line: Callable[[str], None] = _ignore_line,
    on_record: OnRecord = _ignore_record,
) -> RunContext:
    """The context that runs ``plans`` (all of one workload, as ``plan_run``/``plan_sweep`` build them).

    ``launcher``: a backend, or its name (None: the inventory's default, ``get_backend``). With
    ``preflight``, every plan's collective plan is built here, so none runs unless all are valid.

    Raises:
        InputError: an unknown launcher, ``slurm`` for an inventory without a slurm block, or (with
            ``preflight``) an image that cannot run the collective.
        ValueError: no plans, or plans of different workloads.
    """
    names = {plan.options.workload for plan in plans}
    if len(names) != 1:
        raise ValueError(f"a run context runs the plans of one workload, not {sorted(names)}")
    if launcher is None or isinstance(launcher, str):
        launcher = get_backend(inventory, launcher)
    checks = tuple(preflight_plans(inventory, plan) for plan in plans) if preflight else ()
    return RunContext(
        inventory=inventory,
        plans=tuple(plans),
        workload=get_workload(names.pop()),
        backend=launcher,
        runs_dir=runs_dir,
        timeout_s=timeout_s,
        repeats=repeats,
        preflight=Preflight(get_workload(checks[0][0].options.workload), checks) if checks else None,
        on_line=on_line,
        on_record=on_record,
    )
