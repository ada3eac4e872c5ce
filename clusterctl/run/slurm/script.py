"""The batch script of a job, rendered from ``templates/slurm-batch.sh.j2``. Pure.

The script asks for the job's nodes and ranks per node, exports the variables its launcher gives
(the srun launcher's by default: the job's NCCL/Horovod environment and its MPI parameters as
``OMPI_MCA_*``; ``clusterctl.run.launchers.srun``), and runs the launcher's step, whose tasks are the
ranks, each in the runtime's container: pyxis (``--container-image``), apptainer (``apptainer exec``),
docker (``docker run`` per task, the sandbox's) or none (on the host).

Every runtime runs the job's own copy of the payload (uploaded into the job directory at submit,
``PAYLOAD_SUBDIR``), mounted read-only where the image expects it: any image with PyTorch runs it,
the NGC one included. The ranks find their place from Slurm's variables (the payload's ``ranks.py``);
DDP meets at the allocation's first node (``scontrol show hostnames``). Each rank gets an equal share
of its node's CPUs (``--cpus-per-task``, bound to cores) and the GPUs closest to them
(``--gpu-bind=closest``); torch and OpenMP use as many threads as it has CPUs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime

import jinja2

from clusterctl.containers.plan import container_flags, container_spec
from clusterctl.diagnostics.collectors import collection_script
from clusterctl.errors import InputError
from clusterctl.image.record import effective_image_ref
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR, CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Mount, Node, SlurmSpec
from clusterctl.paths import NODE_SAMPLER
from clusterctl.run.launchers import StepLauncher
from clusterctl.run.launchers.srun import Srun
from clusterctl.run.plan import RENDEZVOUS_TRIES
from clusterctl.run.slurm.snapshots import job_collectors
from clusterctl.templating import template_environment
from clusterctl.workloads.image_caps import image_check_step
from clusterctl.workloads.job import Job

TEMPLATE = "slurm-batch.sh.j2"
# Label on every container a job's task starts (docker runtime): the Epilog removes by it.
JOB_LABEL = "io.clusterctl.slurm-job"
# slurmd's spool directory, where its PMIx server keeps the socket the ranks connect to.
SLURMD_SPOOL_DIR = "/var/spool/slurmd"
# The job directory's copy of the payload, mounted read-only at CONTAINER_PAYLOAD_DIR.
PAYLOAD_SUBDIR = "payload"
# The node telemetry sampler: without a --time, its own cap; how long it may take to stop.
DEFAULT_TELEMETRY_CAP_S = 24 * 3600
TELEMETRY_STOP_WAIT_S = 10


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


def ranks_per_node(plan: Job) -> int:
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


def rank_env(
    inventory: Inventory, plan: Job, slurm: SlurmSpec, image: str, launcher: StepLauncher
) -> list[tuple[str, str]]:
    """Every rank's variables: the launcher's (``StepLauncher.environment``), for pyxis on an RDMA fabric
    enroot's MELLANOX_VISIBLE_DEVICES=all (its Mellanox hook then brings the HCAs and verbs providers
    into the container), and CLUSTERCTL_IMAGE."""
    hcas = (
        [("MELLANOX_VISIBLE_DEVICES", "all")] if slurm.runtime == "pyxis" and inventory.primary.rdma else []
    )
    named = [("CLUSTERCTL_IMAGE", image)] if image else []  # the payload names it when it lacks Horovod
    return [*launcher.environment(inventory, plan), *hcas, *named]


def _docker_flags(inventory: Inventory, image: str, payload: Mount) -> list[str]:
    """The benchmark container's docker flags (as `up` starts it) for a task's container.

    Without the cluster's SSH mount (no mpirun reaches it) and without the node's cpuset: the task's
    wrapper gives the container the CPUs Slurm gave the task. With the job's payload mounted.
    """
    spec = container_spec(inventory, inventory.primary, image)
    mounts = [*(m for m in spec.mounts if m.target != CONTAINER_SSH_DIR), payload]
    # No clusterctl labels either: `down` and `status` own the containers `up` starts, not a job's.
    spec = spec.model_copy(update={"mounts": mounts, "cpuset": None, "labels": {}})
    return container_flags(spec)


def _mount(mount: Mount) -> str:
    """``source:target[:ro]``, as pyxis' --container-mounts and apptainer's --bind write a mount."""
    return f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"


def payload_mount(directory: str) -> Mount:
    """The job directory's copy of the payload, read-only where the image's payload would be."""
    return Mount(source=f"{directory}/{PAYLOAD_SUBDIR}", target=CONTAINER_PAYLOAD_DIR, read_only=True)


def _command_lines(
    inventory: Inventory, plan: Job, slurm: SlurmSpec, image: str, payload: Mount
) -> list[str]:
    """What srun starts per task, one quoted line per part (the runtime's wrapper, then the rank's argv)."""
    rank_argv = plan.rank_argv
    if slurm.runtime == "docker":
        return [
            'bash -c "$CLUSTERCTL_TASK" clusterctl-task',
            shlex.join(_docker_flags(inventory, image, payload)),
            shlex.join([image, *rank_argv]),
        ]
    if slurm.runtime == "apptainer":
        binds = [f"--bind={_mount(m)}" for m in [payload, *inventory.container.mounts]]
        gpu = ["--nv"] if plan.gpu else []
        return [shlex.join(["apptainer", "exec", *gpu, *binds, image]), shlex.join(rank_argv)]
    if slurm.runtime == "none":  # on the host: the job's copy itself
        prefix = f"{CONTAINER_PAYLOAD_DIR}/"
        rank_argv = [
            f"{payload.source}/{a.removeprefix(prefix)}" if a.startswith(prefix) else a for a in rank_argv
        ]
    return [shlex.join(rank_argv)]


def job_variables(env: list[tuple[str, str]], *, rendezvous: bool, gpus: int) -> list[str]:
    """The names of every variable the batch script sets for the ranks: the exported environment, the
    rendezvous the script finds on the allocation, the threads per rank, the node's GPU count."""
    names = [name for name, _ in env]
    names += ["MASTER_ADDR", "MASTER_PORT"] if rendezvous else []
    names += ["OMP_NUM_THREADS", *(["CLUSTERCTL_GPUS_PER_NODE"] if gpus else [])]
    return list(dict.fromkeys(names))


def runtime_flags(
    inventory: Inventory, slurm: SlurmSpec, image: str, payload: Mount, variables: list[str]
) -> list[str]:
    """The runtime's flags for the step's starter, quoted: pyxis' own, none for the other runtimes.

    pyxis (0.24's options): the image, no home directory, the payload and the inventory's mounts
    (``--container-mounts=SRC:DST[:ro],...``; the inventory refuses paths with ``,`` or ``:``), and
    ``--container-env`` naming the job's ``variables``: without it an image's own ENV of the same name
    (NGC images set NCCL and OMP ones) wins over the job's.
    """
    flags: list[str] = []
    if slurm.runtime == "pyxis":
        mounts = ",".join(_mount(m) for m in [payload, *inventory.container.mounts])
        flags += [f"--container-image={image}", "--no-container-mount-home", f"--container-mounts={mounts}"]
        flags += [f"--container-env={','.join(variables)}"]
    return [shlex.quote(flag) for flag in flags]


def check_one_gpu_per_rank(ranks: int, gpus: int) -> None:
    """Refuse a job whose nodes run more ranks than they have GPUs (two ranks would share one).

    Raises:
        InputError: ``ranks`` per node above ``gpus`` (when the job asks for GPUs).
    """
    if gpus and ranks > gpus:
        raise InputError(
            f"{ranks} ranks per node on nodes with {gpus} GPU(s): two ranks of a node would share a GPU, "
            "which NCCL refuses (Duplicate GPU detected). Fix: pass --ranks-per-node "
            f"{gpus} or fewer (one rank per GPU), or set slurm.gpus_per_node to the nodes' real GPU count."
        )


def memlock_required(inventory: Inventory, plan: Job) -> bool:
    """Whether the job stops when a node's locked-memory limit is below unlimited: a run that computes on
    GPUs or moves data over RDMA (NCCL pins its buffers); a CPU run over Ethernet, the GPU-shaped
    sandbox's included, only reports the limits."""
    return plan.gpu or inventory.primary.rdma


def telemetry_cap_s(time_limit: str | None) -> int:
    """The sampler's own lifetime cap in a job: the job's ``--time`` (sbatch's forms: minutes, MM:SS,
    HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) plus a minute, or ``DEFAULT_TELEMETRY_CAP_S`` without one."""
    if not time_limit:
        return DEFAULT_TELEMETRY_CAP_S
    days, dash, rest = time_limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if dash:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    else:  # MM, MM:SS, HH:MM:SS
        hours, minutes, seconds = {1: [0, *parts, 0], 2: [0, *parts]}.get(len(parts), parts)
        total = hours * 3600 + minutes * 60 + seconds
    return total + 60 if total else DEFAULT_TELEMETRY_CAP_S  # 0: no limit


def render_batch(
    inventory: Inventory,
    slurm: SlurmSpec,
    plan: Job,
    *,
    image: str,
    directory: str,
    job_name: str,
    launcher: StepLauncher | None = None,
) -> BatchJob:
    """The batch script running ``plan`` through ``slurm`` with ``image`` (unused by the ``none`` runtime),
    its ranks started by ``launcher`` (None: srun with the slurm block's MPI plugin).

    ``directory`` is the job's directory under ``slurm.run_dir``: the output file goes there.

    Raises:
        InputError: the plan's nodes run different rank counts, or more ranks than GPUs.
    """
    output = f"{directory}/output.log"
    gpus = slurm.gpus_per_node if slurm.gpus_per_node is not None else inventory.primary.gpus.count
    payload = payload_mount(directory)
    per_node = ranks_per_node(plan)
    check_one_gpu_per_rank(per_node, gpus)
    launcher = launcher or Srun(slurm.mpi)
    env = rank_env(inventory, plan, slurm, image, launcher)
    rendezvous = plan.rendezvous_port is not None
    variables = job_variables(env, rendezvous=rendezvous, gpus=gpus)
    values = {
        "workload": plan.options.workload,
        "runtime": slurm.runtime,
        "job_name": job_name,
        "output": output,
        "nodes": len(plan.hosts),
        "ranks_per_node": per_node,
        "sbatch_options": sbatch_options(slurm, gpus),
        "env": env,
        "rendezvous": rendezvous,
        "memlock_required": memlock_required(inventory, plan),
        "rendezvous_tries": RENDEZVOUS_TRIES,
        "gpus": gpus,
        "payload": payload,
        "image": image,
        "job_label": JOB_LABEL,
        "spool_dir": SLURMD_SPOOL_DIR,
        "step": launcher.step(
            plan,
            runtime_flags(inventory, slurm, image, payload, variables),
            _command_lines(inventory, plan, slurm, image, payload),
            gpus=gpus,
        ),
        "directory": directory,
        "collect_script": collection_script(job_collectors(inventory.primary.fabric)),
        "sampler": f"{payload.source}/{NODE_SAMPLER}",
        "telemetry_cap_s": telemetry_cap_s(slurm.time_limit),
        "telemetry_stop_wait_s": TELEMETRY_STOP_WAIT_S,
        "interface": inventory.primary.fabric.interface,
        "image_check": image_check_step(inventory, plan, slurm.runtime, image),
    }
    script = _environment().get_template(TEMPLATE).render(**values)
    return BatchJob(script=script, directory=directory, output=output)


def job_image(inventory: Inventory, slurm: SlurmSpec) -> str:
    """The image the ranks run in: ``slurm.image``, else (docker) the one `image build` made.

    Raises:
        InputError: pyxis without slurm.image (enroot cannot import the local Docker tag `image build`
            makes), or docker and no image built yet.
    """
    if slurm.image or slurm.runtime == "none":
        return slurm.image or ""
    if slurm.runtime == "pyxis":
        raise InputError(
            "slurm.image is unset, and pyxis cannot run the image `clusterctl image build` made: it is a "
            "Docker tag on one engine, which enroot on the nodes cannot import. Fix: set slurm.image to an "
            "image the nodes pull, e.g. nvcr.io#nvidia/pytorch:24.01-py3 (any image with PyTorch: the job "
            "mounts its own copy of the payload), or to a squashfs made with `enroot import dockerd://IMAGE` "
            "on storage the nodes share."
        )
    return effective_image_ref(inventory)


def login_node(slurm: SlurmSpec) -> Node:
    """The login node as a ``Node``, so that ``clusterctl.hosts.ssh.connect`` reaches it."""
    return Node(name="slurm-login", address=slurm.login.address, ssh=slurm.login.ssh)


def slurm_block(inventory: Inventory) -> SlurmSpec:
    """The inventory's slurm block.

    Raises:
        InputError: it has none.
    """
    if inventory.slurm is None:
        raise InputError("the inventory has no slurm block. Fix: add one, or use --launcher ssh.")
    return inventory.slurm


def plan_batch(
    inventory: Inventory, plan: Job, started: datetime, token: str, launcher: StepLauncher | None = None
) -> BatchJob:
    """The batch job of ``plan``: its script, in ``<run_dir>/<cluster>-<UTC time>-<token>``, its ranks
    started by ``launcher`` (None: srun).

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
        launcher=launcher,
    )
