"""The launcher contract: what runs a launch plan once it is built (start, follow, cancel, collect).

A ``Launcher`` starts a plan and returns a ``Launch``; the conductor (``clusterctl.run.runner``)
follows every launch the same way: until it ends or its deadline passes, cancelling it on timeout or
Ctrl-C, then collecting it. Whatever started it, a launch collects the same things (``Collected``):
its whole output, what ran, and the fabric counters and topology snapshots it took of the nodes the
run used, so a run reaches its record by one route. Two launchers exist:

- ``ssh``: mpirun in the primary node's benchmark container; the snapshot and the counters read over
  SSH on the plan's nodes right before the run, the counters again right after it
  (``clusterctl.run.launchers.ssh``);
- ``slurm``: ``sbatch`` of a rendered batch script on the login node, ranks started by
  ``srun --mpi=<the inventory's slurm.mpi>``; the snapshots and counters taken by the batch script
  inside the allocation, on the nodes the scheduler gave (``clusterctl.run.launchers.slurm``).

``clusterctl.run.context.get_launcher`` resolves a launcher by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clusterctl.diagnostics.bundle import NodeBundle
    from clusterctl.inventory import Inventory
    from clusterctl.results.counters import CounterReadings
    from clusterctl.results.record import LauncherName
    from clusterctl.run.plan import LaunchPlan


@dataclass(frozen=True)
class Collected:
    """What a launch leaves once it has ended: its output, what ran, and what it saw of its nodes.

    ``output`` is every rank's lines (tagged) and the launcher's own; ``command`` what ran (the
    mpirun command or the batch script); ``counters`` the fabric counters of the run's nodes read
    before and after it (None: not read); ``bundles`` the topology snapshots the launch took, by the
    run directory's folder name (``topology``: before the run; ``topology-after``); ``telemetry``
    each node's sampler output during the run (JSON Lines, ``clusterctl.results.telemetry``), by node
    (None: the launch ran no sampler); ``telemetry_errors`` why a node's sampler did not start or lost samples, by node.
    """

    output: str
    command: str
    counters: CounterReadings | None = None
    bundles: Mapping[str, Mapping[str, NodeBundle]] = field(default_factory=dict)
    telemetry: Mapping[str, str] | None = None
    telemetry_errors: Mapping[str, str] = field(default_factory=dict)


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

    @property
    def name(self) -> LauncherName:
        """What the run's record says started it."""
        ...

    def start(self, inventory: Inventory, plan: LaunchPlan) -> Launch:
        """Start ``plan`` and return the running launch."""
        ...

    def describe(self, inventory: Inventory, plan: LaunchPlan) -> str:
        """What ``start`` would run, for --dry-run: a command or a batch script, ready to paste."""
        ...
