"""The srun launcher: a job as one ``srun`` step of a batch script, inside the allocation. Pure.

The ranks' variables are exported by the script before the step, and srun hands the whole environment
to every task: the job's own (not ``MASTER_ADDR``, which the script finds on the allocation), and its
MPI parameters as ``OMPI_MCA_*`` (without mpirun, Open MPI reads them from there). The step runs
``srun --mpi=<plugin> --kill-on-bad-exit=1 --label``: ``--label`` prefixes each line with its rank, which
``clusterctl.diagnostics.model.split_tag`` reads like mpirun's ``--tag-output``. Every rank gets an equal
share of its node's CPUs (``--cpus-per-task``, bound to cores) and the GPUs closest to them
(``--gpu-bind=closest``): Slurm binds, so the job's ``bind`` wrapper is not used.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clusterctl.inventory import Inventory
from clusterctl.workloads.job import Job

# Set by the script from the allocation, not from the job (DDP's rendezvous: its first node).
FROM_ALLOCATION = frozenset({"MASTER_ADDR"})


def allocation_environment(job: Job) -> list[tuple[str, str]]:
    """What ranks started inside an allocation get from the batch script: the job's variables (not
    those the allocation decides), then its MPI parameters as OMPI_MCA_*."""
    own = [(name, value) for name, value in job.env.items() if name not in FROM_ALLOCATION]
    return [*own, *((f"OMPI_MCA_{name}", value) for name, value in job.mpi.items())]


@dataclass(frozen=True)
class Srun:
    """``srun --mpi=<mpi>``: the ranks as the tasks of one step (``mpi``: the inventory's slurm.mpi)."""

    mpi: str

    def environment(self, inventory: Inventory, job: Job) -> list[tuple[str, str]]:
        """``allocation_environment``: srun hands the whole environment to every task."""
        del inventory
        return allocation_environment(job)

    def flags(self) -> list[str]:
        """srun's own flags: the MPI plugin, kill the step when a rank fails, rank labels."""
        return [f"--mpi={self.mpi}", "--kill-on-bad-exit=1", "--label"]

    def step(self, job: Job, flags: list[str], task: list[str], *, gpus: int) -> list[str]:
        """``srun`` with its flags and the runtime's, the binding, then each task line."""
        del job
        starter = [*(shlex.quote(f) for f in self.flags()), *flags]
        bind = '--cpus-per-task="$cpus_per_task" --cpu-bind=cores' + (" --gpu-bind=closest" if gpus else "")
        lines = [f"srun {' '.join(starter)} \\", f"  {bind} \\"]
        ends = [" \\"] * (len(task) - 1) + [" || status=$?"]
        return lines + [f"  {line}{end}" for line, end in zip(task, ends, strict=True)]
