"""The backend contract: what runs a job once it is built (describe, prepare, start, follow, cancel, collect).

A ``Backend`` runs a job (``clusterctl.workloads.job``) through a launcher (``clusterctl.run.launchers``:
the command that starts the ranks) and returns a ``Launch``; the conductor (``clusterctl.run.conductor``)
follows every launch the same way: until it ends or its deadline passes, cancelling it on timeout or
Ctrl-C, then collecting it. Whatever started it, a launch collects the same things (``Collected``):
its whole output, what ran, and the fabric counters and topology snapshots it took of the nodes the
run used, so a run reaches its record by one route. Two backends exist:

- ``ssh``: the launcher's command (mpirun) in the primary node's benchmark container; the snapshot and
  the counters read over SSH on the job's nodes right before the run, the counters again right after
  it (``clusterctl.run.backends.ssh``);
- ``slurm``: ``sbatch`` of a rendered batch script on the login node, the ranks started by the
  launcher's step (``srun --mpi=<the inventory's slurm.mpi>``); the snapshots and counters taken by the
  batch script inside the allocation, on the nodes the scheduler gave (``clusterctl.run.backends.slurm``).

The command line calls a backend a launcher (``--launcher ssh|slurm``), as the run's record does
(``RunRecord.launcher``); ``clusterctl.run.context.get_backend`` resolves one by that name.
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
    from clusterctl.workloads.image_caps import JobImage
    from clusterctl.workloads.job import Job


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
    """One started execution of a job."""

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Stream (or poll) until the run ends: its exit code; None when ``deadline`` (monotonic) passed."""
        ...

    def cancel(self) -> None:
        """Stop the run and wait (bounded) until nothing of it is left running."""
        ...

    def collect(self) -> Collected:
        """The run's whole output, as its parsers read it, and what the launch saw of its nodes."""
        ...


@dataclass(frozen=True)
class Description:
    """What a backend would run, for --dry-run: ``text`` printed as it is (it pastes exactly), ``fields``
    the --json object's own fields (beside its schema and the counters the proof expects)."""

    text: str
    fields: Mapping[str, object]


class Backend(Protocol):
    """Runs jobs on a cluster."""

    @property
    def name(self) -> LauncherName:
        """What the run's record says started it (the command line's ``--launcher``)."""
        ...

    @property
    def starter(self) -> str:
        """What a run's exit code is the exit code of, in a finding's words ("mpirun")."""
        ...

    def describe(self, inventory: Inventory, job: Job) -> Description:
        """What ``start`` would run, for --dry-run: a command or a batch script, ready to paste."""
        ...

    def job_image(self, inventory: Inventory) -> JobImage:
        """The image this backend runs the ranks in on ``inventory``, and what is known of it."""
        ...

    def prepare(self, inventory: Inventory, job: Job, run_id: str) -> Job:
        """``job`` as the run ``run_id`` starts it: rank 0's rendezvous on the run's own port, chosen
        where this backend can see which are free; a job without a rendezvous unchanged."""
        ...

    def on_exactly(self, inventory: Inventory) -> Inventory:
        """``inventory``, a group of a cluster's nodes, as this backend needs it to run a job on exactly
        those nodes and no other (`check pairs`' groups): unchanged where the inventory's nodes are
        where jobs run; where a scheduler picks the nodes, told to take these."""
        ...

    def start(self, inventory: Inventory, job: Job) -> Launch:
        """Start ``job`` and return the running launch."""
        ...
