"""The batch script of a launch plan, rendered from ``templates/slurm-batch.sh.j2``. Pure.

The script asks for the plan's nodes and ranks per node, exports the ssh launcher's NCCL/Horovod
environment (and its MCA parameters as ``OMPI_MCA_*``), and runs one
``srun --mpi=<plugin> --kill-on-bad-exit=1 --label`` step whose tasks are the ranks, each in the
runtime's container: pyxis (``--container-image``), apptainer (``apptainer exec``), docker (``docker
run`` per task, the sandbox's) or none (on the host). ``srun --label`` prefixes each line with its
rank, which ``clusterctl.diagnostics.model.split_tag`` reads like mpirun's ``--tag-output``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime

import jinja2

from clusterctl.container_plan import container_flags, container_spec
from clusterctl.diagnostics.collect import collection_script
from clusterctl.errors import InputError
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Mount, SlurmSpec
from clusterctl.launch import LaunchPlan, mca_params
from clusterctl.slurm.snapshots import job_collectors
from clusterctl.templating import template_environment

TEMPLATE = "slurm-batch.sh.j2"
# Label on every container a job's task starts (docker runtime): the Epilog removes by it.
JOB_LABEL = "io.clusterctl.slurm-job"
# slurmd's spool directory, where its PMIx server keeps the socket the ranks connect to.
SLURMD_SPOOL_DIR = "/var/spool/slurmd"
# MCA parameters that only concern mpirun's own ssh launch (no mpirun under srun).
_MPIRUN_ONLY_MCA = {"plm_rsh_args"}


@dataclass(frozen=True)
class BatchJob:
    """A rendered batch script and where its output goes."""

    script: str
    directory: str
    output: str


def _environment() -> jinja2.Environment:
    env = template_environment()
    env.filters["q"] = quote_always
    return env


def quote_always(value: str) -> str:
    """``value`` in single quotes for a POSIX shell, even when shlex would leave it bare.

    ``export NAME==eth0`` (NCCL's exact-name form) is valid shell, but reads like a typo to people
    and to shellcheck (SC1097); quoted, it is plainly a value.
    """
    quoted = shlex.quote(value)
    return quoted if quoted != value else f"'{value}'"


def ranks_per_node(plan: LaunchPlan) -> int:
    """The plan's ranks on every node (Slurm's --ntasks-per-node is one number).

    Raises:
        InputError: the plan's nodes run different rank counts.
    """
    counts = {h.slots for h in plan.hosts}
    if len(counts) != 1:
        detail = ", ".join(f"{h.node}: {h.slots}" for h in plan.hosts)
        raise InputError(
            f"the slurm launcher runs the same number of ranks on every node, this plan has {detail}. "
            "Fix: pass --ranks-per-node, or give the nodes the same slots."
        )
    return counts.pop()


def sbatch_options(slurm: SlurmSpec, gpus_per_node: int) -> list[str]:
    """The ``#SBATCH`` options the slurm block asks for, then its extra lines (all validated there)."""
    fields = [
        ("partition", slurm.partition),
        ("account", slurm.account),
        ("reservation", slurm.reservation),
        ("qos", slurm.qos),
        ("time", slurm.time_limit),
        ("nodelist", slurm.nodelist),
        ("constraint", slurm.constraint),
    ]
    options = [f"--{name}={value}" for name, value in fields if value is not None]
    if gpus_per_node:
        options.append(f"--gpus-per-node={gpus_per_node}")
    if slurm.exclusive:
        options.append("--exclusive")
    return [*options, *slurm.extra_sbatch]


def rank_env(inventory: Inventory, plan: LaunchPlan) -> list[tuple[str, str]]:
    """Every rank's variables: the plan's NCCL/Horovod ones and the MCA parameters as OMPI_MCA_*."""
    pairs = mca_params(inventory)
    mca = [
        (f"OMPI_MCA_{pairs[i + 1]}", pairs[i + 2])
        for i in range(0, len(pairs), 3)
        if pairs[i + 1] not in _MPIRUN_ONLY_MCA
    ]
    return [*plan.env.items(), *mca]


def _docker_flags(inventory: Inventory, image: str) -> list[str]:
    """The benchmark container's docker flags (as `up` starts it) for a task's container.

    Without the cluster's SSH mount (no mpirun reaches it) and without the node's cpuset: the task's
    wrapper gives the container the CPUs Slurm gave the task.
    """
    spec = container_spec(inventory, inventory.primary, image)
    mounts = [m for m in spec.mounts if m.target != CONTAINER_SSH_DIR]
    # No clusterctl labels either: `down` and `status` own the containers `up` starts, not a job's.
    spec = spec.model_copy(update={"mounts": mounts, "cpuset": None, "labels": {}})
    return container_flags(spec)


def _mount(mount: Mount) -> str:
    """``source:target[:ro]``, as pyxis' --container-mounts and apptainer's --bind write a mount."""
    return f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"


def _command_lines(inventory: Inventory, plan: LaunchPlan, slurm: SlurmSpec, image: str) -> list[str]:
    """What srun starts per task, one quoted line per part (the runtime's wrapper, then the rank's argv)."""
    rank_argv = plan.rank_argv
    mounts = inventory.container.mounts
    if slurm.runtime == "docker":
        return [
            'bash -c "$CLUSTERCTL_TASK" clusterctl-task',
            shlex.join(_docker_flags(inventory, image)),
            shlex.join([image, *rank_argv]),
        ]
    if slurm.runtime == "apptainer":
        binds = [f"--bind={_mount(m)}" for m in mounts]
        gpu = ["--nv"] if plan.gpu else []
        return [shlex.join(["apptainer", "exec", *gpu, *binds, image]), shlex.join(rank_argv)]
    return [shlex.join(rank_argv)]


def srun_flags(inventory: Inventory, plan: LaunchPlan, slurm: SlurmSpec, image: str) -> list[str]:
    """srun's flags: the MPI plugin, kill the step when a rank fails, rank labels, the runtime's flags."""
    flags = [f"--mpi={slurm.mpi}", "--kill-on-bad-exit=1", "--label"]
    if slurm.runtime == "pyxis":
        mounts = ",".join(_mount(m) for m in inventory.container.mounts)
        flags += [f"--container-image={image}", "--no-container-mount-home"]
        if mounts:
            flags.append(f"--container-mounts={mounts}")
    return [shlex.quote(flag) for flag in flags]


def render_batch(
    inventory: Inventory, slurm: SlurmSpec, plan: LaunchPlan, *, image: str, directory: str, job_name: str
) -> BatchJob:
    """The batch script running ``plan`` through ``slurm`` with ``image`` (unused by the ``none`` runtime).

    ``directory`` is the job's directory under ``slurm.run_dir``: the output file goes there.

    Raises:
        InputError: the plan's nodes run different rank counts.
    """
    output = f"{directory}/output.log"
    gpus = slurm.gpus_per_node if slurm.gpus_per_node is not None else inventory.primary.gpus.count
    values = {
        "workload": plan.options.workload,
        "runtime": slurm.runtime,
        "job_name": job_name,
        "output": output,
        "nodes": len(plan.hosts),
        "ranks_per_node": ranks_per_node(plan),
        "sbatch_options": sbatch_options(slurm, gpus),
        "env": rank_env(inventory, plan),
        "job_label": JOB_LABEL,
        "spool_dir": SLURMD_SPOOL_DIR,
        "srun_flags": srun_flags(inventory, plan, slurm, image),
        "command_lines": _command_lines(inventory, plan, slurm, image),
        "directory": directory,
        "collect_script": collection_script(job_collectors(inventory.primary.fabric)),
    }
    script = _environment().get_template(TEMPLATE).render(**values)
    return BatchJob(script=script, directory=directory, output=output)


def job_image(inventory: Inventory, slurm: SlurmSpec) -> str:
    """The image the ranks run in: ``slurm.image``, else (docker, pyxis) the one `image build` made.

    Raises:
        InputError: docker or pyxis runtime and no image built yet.
    """
    if slurm.image or slurm.runtime == "none":
        return slurm.image or ""
    from clusterctl.image.build import effective_image_ref  # the docker SDK: only when no image is named

    return effective_image_ref(inventory)


def slurm_block(inventory: Inventory) -> SlurmSpec:
    """The inventory's slurm block.

    Raises:
        InputError: it has none.
    """
    if inventory.slurm is None:
        raise InputError("the inventory has no slurm block. Fix: add one, or use --launcher ssh.")
    return inventory.slurm


def plan_batch(inventory: Inventory, plan: LaunchPlan, started: datetime, token: str) -> BatchJob:
    """The batch job of ``plan``: its script, in ``<run_dir>/<cluster>-<UTC time>-<token>``.

    Raises:
        InputError: as ``render_batch`` and ``job_image``.
    """
    slurm = slurm_block(inventory)
    name = f"{inventory.cluster.name}-{started.strftime('%Y%m%dT%H%M%SZ')}-{token}"
    return render_batch(
        inventory,
        slurm,
        plan,
        image=job_image(inventory, slurm),
        directory=f"{slurm.run_dir.rstrip('/')}/{name}",
        job_name=f"clusterctl-{plan.options.workload}",
    )
