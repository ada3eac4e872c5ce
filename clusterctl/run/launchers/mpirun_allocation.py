"""mpirun inside a Slurm allocation: the batch script's step is one ``mpirun``, not ``srun``. Pure.

A common real setup (Open MPI built with Slurm support, ranks in Apptainer or on the host): mpirun reads
the allocation (its nodes and tasks per node) from Slurm's variables and starts its daemons through
Slurm itself, so it needs neither ``-H`` nor ssh. The ranks inherit the variables the batch script
exports (the same as srun's: the job's own and its MPI parameters as ``OMPI_MCA_*``); ``--tag-output``
prefixes every line with its rank, as the ssh backend's mpirun does. Slurm's binding flags are srun's,
so the ranks here are placed ``ppr:<ranks per node>:node`` and bound by mpirun to their cores.

Use it with the slurm backend: ``SlurmBackend(launcher=MpirunInAllocation())``.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.run.launchers.srun import allocation_environment
from clusterctl.workloads.job import Job


@dataclass(frozen=True)
class MpirunInAllocation:
    """``mpirun`` started by the batch script on the allocation's first node."""

    def environment(self, inventory: Inventory, job: Job) -> list[tuple[str, str]]:
        """What srun's ranks get (``allocation_environment``): mpirun's daemons, started through Slurm,
        and so its ranks inherit it the same way."""
        del inventory
        return allocation_environment(job)

    def step(self, job: Job, flags: list[str], task: list[str], *, gpus: int) -> list[str]:
        """``mpirun -np N --map-by ppr:K:node``, then each task line.

        Raises:
            InputError: the runtime gives srun-only flags (pyxis' ``--container-image``): mpirun
                cannot start the ranks in a pyxis container.
        """
        del gpus
        if flags:
            raise InputError(
                f"mpirun inside the allocation cannot pass srun's own flags ({' '.join(flags)}): "
                "the pyxis runtime exists only as srun flags. Fix: use the srun launcher with pyxis, or "
                "set slurm.runtime to apptainer, docker or none."
            )
        per_node = {h.slots for h in job.hosts}.pop()
        starter = f"mpirun -np {job.world_size} --map-by ppr:{per_node}:node --bind-to core --tag-output"
        ends = [" \\"] * (len(task) - 1) + [" || status=$?"]
        return [f"{starter} \\", *(f"  {line}{end}" for line, end in zip(task, ends, strict=True))]
