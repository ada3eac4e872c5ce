"""The launchers: what turns a job (``clusterctl.workloads.job``) into the command that starts its ranks.

A launcher knows one program's syntax and nothing of where it runs: ``mpirun`` (its ``-H``, ``-x`` and
``-mca`` flags; ``clusterctl.run.launchers.mpirun``) and ``srun`` (the step of a batch script, the
ranks' variables exported before it; ``clusterctl.run.launchers.srun``). A backend
(``clusterctl.run.backends``: ssh, slurm) runs what the launcher renders: it submits, follows, cancels
and collects. The same seam as ReFrame's ``reframe/core/launchers`` and ``reframe/core/schedulers``.

Two shapes, by what the backend runs:

- ``Launcher``: a command run as it is (the ssh backend execs it in the primary's container);
- ``StepLauncher``: the lines of a batch script that start the ranks inside an allocation, and the
  variables the script exports for them (the slurm backend).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory
    from clusterctl.workloads.job import Job


class Launcher(Protocol):
    """Renders a job as one command."""

    def command(self, inventory: Inventory, job: Job) -> list[str]:
        """The argv that starts every rank of ``job`` (the launcher's prefix, then the rank's argv)."""
        ...


class StepLauncher(Protocol):
    """Renders a job as the step of a batch script, inside the allocation the scheduler gave."""

    def environment(self, inventory: Inventory, job: Job) -> list[tuple[str, str]]:
        """The variables the batch script exports before the step, in order (the ranks inherit them)."""
        ...

    def step(self, job: Job, flags: list[str], task: list[str], *, gpus: int) -> list[str]:
        """The script's lines that start the ranks, ``status`` set to the step's exit code where it fails.

        ``flags``: the runtime's own flags for the starter (quoted; pyxis' ``--container-*``); ``task``:
        what each rank runs, one quoted line per part (the runtime's wrapper, then the rank's argv);
        ``gpus``: the node's GPU count (0: none asked for).
        """
        ...
