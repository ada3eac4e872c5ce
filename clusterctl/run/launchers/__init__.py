"""Launchers: what `run` does once the launch plan is built (start, stream or poll, cancel, collect).

A ``Launcher`` starts a plan and returns a ``Launch``; ``run_launch`` drives any launch the same
way: follow it until it ends or its deadline passes, cancel it on timeout or Ctrl-C, and collect its
whole output. Two launchers exist:

- ``ssh``: mpirun in the primary node's benchmark container (``clusterctl.run.launchers.ssh``);
- ``slurm``: ``sbatch`` of a rendered batch script on the login node, ranks started by
  ``srun --mpi=<the inventory's slurm.mpi>`` (``clusterctl.run.launchers.slurm``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from clusterctl.errors import InputError
from clusterctl.results.record import LAUNCHERS, TIMEOUT_EXIT_CODE, LauncherName

if TYPE_CHECKING:
    from clusterctl.diagnostics.bundle import NodeBundle
    from clusterctl.inventory import Inventory
    from clusterctl.results.counters import CounterReadings
    from clusterctl.run.plan import LaunchPlan


@dataclass(frozen=True)
class Collected:
    """What a launch leaves once it has ended: its output, what ran, and what it saw of its nodes.

    ``counters`` and ``bundles`` come from launchers that observe the nodes the run really ran on
    (``Launcher.observes_nodes``): the fabric counters read there before and after the run, and
    their topology snapshots, by the run directory's folder name (``topology``: before the run).
    """

    output: str
    command: str
    counters: CounterReadings | None = None
    bundles: Mapping[str, Mapping[str, NodeBundle]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecResult:
    """What one execution of a plan left: its exit code and its whole output (every rank, tagged).

    ``launcher`` started it; ``command`` is what ran (the mpirun command or the batch script), None
    when the executor does not say; ``counters`` and ``bundles`` as in ``Collected``.
    """

    exit_code: int
    output: str
    timed_out: bool = False
    launcher: LauncherName = "ssh"
    command: str | None = None
    counters: CounterReadings | None = None
    bundles: Mapping[str, Mapping[str, NodeBundle]] = field(default_factory=dict)


class Launch(Protocol):
    """One started execution of a plan."""

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Stream (or poll) until the run ends: its exit code; None when ``deadline`` (monotonic) passed."""
        ...

    def cancel(self) -> None:
        """Stop the run and wait (bounded) until nothing of it is left running."""
        ...

    def collect(self) -> Collected:
        """The run's whole output, as its parsers read it, and what the launch saw of its nodes."""
        ...


class Launcher(Protocol):
    """Starts launch plans on a cluster."""

    name: LauncherName
    # True: the launch reads the fabric counters and topology of the nodes the run got itself (a
    # scheduler picks them); False: the caller reads them on the plan's nodes over SSH.
    observes_nodes: bool

    def start(self, inventory: Inventory, plan: LaunchPlan) -> Launch:
        """Start ``plan`` and return the running launch."""
        ...

    def describe(self, inventory: Inventory, plan: LaunchPlan) -> str:
        """What ``start`` would run, for --dry-run: a command or a batch script, ready to paste."""
        ...


def run_launch(
    launcher: Launcher,
    inventory: Inventory,
    plan: LaunchPlan,
    *,
    timeout_s: float,
    on_line: Callable[[str], None],
) -> ExecResult:
    """Start ``plan`` with ``launcher``, follow it to its end, and collect its output.

    A run past ``timeout_s`` is cancelled and returned with exit code 124; Ctrl-C cancels it and
    re-raises.
    """
    launch = launcher.start(inventory, plan)
    try:
        code = launch.follow(on_line, time.monotonic() + timeout_s)
    except BaseException:
        launch.cancel()
        raise
    if code is None:
        launch.cancel()
    got = launch.collect()
    return ExecResult(
        TIMEOUT_EXIT_CODE if code is None else code,
        got.output,
        timed_out=code is None,
        launcher=launcher.name,
        command=got.command,
        counters=got.counters,
        bundles=got.bundles,
    )


def get_launcher(inventory: Inventory, name: str | None) -> Launcher:
    """The launcher called ``name``; None: the inventory's default (``slurm`` when its slurm block says so).

    Raises:
        InputError: an unknown name, or ``slurm`` for an inventory without a slurm block.
    """
    if name is None:
        name = "slurm" if inventory.slurm is not None and inventory.slurm.default else "ssh"
    if name == "ssh":
        from clusterctl.run.launchers.ssh import SshLauncher

        return SshLauncher()
    if name == "slurm":
        if inventory.slurm is None:
            where = f" {inventory.source}" if inventory.source else ""
            raise InputError(
                f"--launcher slurm: the inventory{where} has no slurm block. Fix: add one (login node, "
                "partition, runtime; `clusterctl inventory schema` describes it), or use --launcher ssh."
            )
        from clusterctl.run.launchers.slurm import SlurmLauncher

        return SlurmLauncher()
    raise InputError(f"--launcher {name!r}: use one of {', '.join(LAUNCHERS)}.")
