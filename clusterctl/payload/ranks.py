"""A rank's place in the job, from whichever launcher started it. Standard library only.

The payloads run under mpirun (the ssh launcher), under srun (the slurm launcher: DDP never calls
MPI_Init, so no ``OMPI_COMM_WORLD_*`` exists there) and under torchrun. Each launcher describes the
rank in its own variables; they are read in this order, and every source present must agree:

1. Open MPI (mpirun, prterun): ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``,
   ``OMPI_COMM_WORLD_LOCAL_RANK``;
2. Slurm (srun): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``;
3. PMIx (srun --mpi=pmix, prterun): ``PMIX_RANK`` (the rank only);
4. torchrun: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``.

Two sources that disagree (a launcher started inside another one's environment, e.g. mpirun inside a
Slurm batch step whose ``SLURM_PROCID`` is 0 for every rank) stop the rank before it joins anything:
a wrong rank would hang the rendezvous or train on the wrong device. No source at all is a single
process (rank 0 of 1).

The rank's GPU is chosen here too (``gpu_choice``): one per rank, the one at its place among the GPUs of
its CPUs' socket under srun's distribution, printed before training as its ``CLUSTERCTL_PLACEMENT``
line; a rank that would share a GPU stops.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# (launcher, rank variable, world size variable, local rank variable); None: the source has no such variable.
SOURCES: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("PMIx", "PMIX_RANK", None, None),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
)
_FIELDS = ("rank", "world size", "local rank")


class RankError(SystemExit):
    """The environment does not describe one consistent rank: the payload exits with this message."""


@dataclass(frozen=True)
class Ranks:
    """This process's rank, the world size, its rank on its node, and the launcher(s) that said so."""

    rank: int
    world_size: int
    local_rank: int
    source: str


def _read(environ: Mapping[str, str], name: str) -> int:
    text = environ[name]
    if not text.strip().isdigit():
        raise RankError(f"ranks: {name}={text!r} is not a non-negative integer; the launcher set it wrongly.")
    return int(text)


def resolve_ranks(environ: Mapping[str, str]) -> Ranks:
    """The rank described by ``environ`` (see the module's order).

    Raises:
        RankError: a value is not an integer, two sources disagree, a rank comes without its world
            size or local rank, or the rank is not below the world size.
    """
    found: list[dict[str, tuple[str, int]]] = [{}, {}, {}]  # per field: variable -> value
    sources: list[str] = []
    for launcher, *names in SOURCES:
        present = [name for name in names if name is not None and name in environ]
        if present:
            sources.append(launcher)
        for index, name in enumerate(names):
            if name is not None and name in environ:
                found[index][name] = (launcher, _read(environ, name))
    if not sources:
        return Ranks(0, 1, 0, "none (a single process)")
    values: list[int | None] = []
    for field, seen in zip(_FIELDS, found, strict=True):
        distinct = {value for _, value in seen.values()}
        if len(distinct) > 1:
            shown = ", ".join(f"{name}={value} ({launcher})" for name, (launcher, value) in seen.items())
            raise RankError(
                f"ranks: the launchers' variables disagree on the {field}: {shown}. A launcher started "
                "inside another one's environment; unset the outer launcher's variables before starting "
                "the ranks (e.g. mpirun inside a Slurm job: use srun instead)."
            )
        values.append(distinct.pop() if distinct else None)
    rank, world, local = values
    missing = [field for field, value in zip(_FIELDS, values, strict=True) if value is None]
    if missing and (world is None or world > 1):
        raise RankError(
            f"ranks: {', '.join(sources)} set no {' and no '.join(missing)}; start the ranks with mpirun, "
            "srun or torchrun, which set all three."
        )
    world = world or 1
    rank = rank or 0
    if rank >= world:
        raise RankError(f"ranks: rank {rank} is not below the world size {world} ({', '.join(sources)}).")
    return Ranks(rank, world, local or 0, " = ".join(sources))


# srun's second distribution level (how a node's tasks are laid over its sockets) when SLURM_DISTRIBUTION
# does not name one: cyclic, consecutive tasks on alternate sockets (srun(1) --distribution; the
# default is block:cyclic).
DEFAULT_SOCKET_DISTRIBUTION = "cyclic"
# What CUDA_VISIBLE_DEVICES holds when Slurm gave the task no GPU.
_NO_GPU = {"", "NoDevFiles"}


class GpuChoiceError(RankError):
    """Two ranks of a node would use the same GPU: the payload exits before training."""


@dataclass(frozen=True)
class GpuChoice:
    """The GPU a rank uses: its position among the GPUs the rank sees (torch's ``cuda:<index>``), its
    name there (the ``CUDA_VISIBLE_DEVICES`` entry), and every GPU the rank sees."""

    index: int
    gpu: str
    visible: tuple[str, ...]


def socket_distribution(distribution: str | None) -> str:
    """``block`` or ``cyclic``: how srun lays a node's tasks over its sockets, from ``SLURM_DISTRIBUTION``
    (``first[:second[:third]][,Pack|NoPack]``; ``fcyclic`` and ``*`` place tasks like ``cyclic``)."""
    levels = (distribution or "").split(",", 1)[0].split(":")
    return "block" if len(levels) > 1 and levels[1] == "block" else DEFAULT_SOCKET_DISTRIBUTION


def tasks_on_node(spec: str, node_id: int) -> int | None:
    """Tasks on node ``node_id`` of the step from Slurm's compressed list (``SLURM_STEP_TASKS_PER_NODE``:
    ``2(x3),1`` is 2 on each of the first three nodes, 1 on the fourth); None when it does not say."""
    counts: list[int] = []
    for part in spec.split(","):
        count, _, repeat = part.strip().partition("(x")
        if not count.isdigit() or (repeat and not repeat.rstrip(")").isdigit()):
            return None
        counts += [int(count)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts[node_id] if 0 <= node_id < len(counts) else None


def choose_gpu(
    local_rank: int, local_size: int, visible: Sequence[str], gpus_on_node: int, distribution: str | None
) -> GpuChoice:
    """The GPU local rank ``local_rank`` of ``local_size`` uses among the ``visible`` ones (pure).

    Under ``srun --cpu-bind=cores --gpu-bind=closest`` a task sees the GPUs of its own socket (gres.conf's
    ``Cores=``), and the ranks that share a socket see the same GPUs: each takes the one at its place
    among them. That place follows srun's layout of tasks over the node's sockets (as many as
    ``gpus_on_node`` holds groups of ``visible``): ``cyclic`` (the default) puts local rank ``r`` on socket
    ``r mod sockets`` as its ``r div sockets``-th task; ``block`` fills one socket's share of the tasks
    before the next. With every GPU visible (one socket, or no binding) that is the local rank itself.

    Raises:
        GpuChoiceError: more ranks share this rank's GPUs than there are GPUs, or it sees none.
    """
    if not visible:
        raise GpuChoiceError(
            f"ranks: local rank {local_rank} sees no GPU; the job asked for none on this node."
        )
    sockets = max(1, gpus_on_node // len(visible))
    if socket_distribution(distribution) == "block":
        place = local_rank % -(-local_size // sockets)
    else:
        place = local_rank // sockets
    if place >= len(visible):
        raise GpuChoiceError(
            f"ranks: local rank {local_rank} of {local_size} would share a GPU: it is rank {place + 1} of its "
            f"socket, which has {len(visible)} GPU(s) ({','.join(visible)}). Two ranks on one GPU make NCCL "
            "abort (Duplicate GPU detected). Fix: run at most as many ranks per node as the node has GPUs "
            "(--ranks-per-node), spread evenly over its sockets."
        )
    return GpuChoice(place, visible[place], tuple(visible))


def gpu_choice(environ: Mapping[str, str], local_rank: int, cuda_devices: int) -> GpuChoice | None:
    """This rank's GPU from its environment: the GPUs Slurm made visible (``CUDA_VISIBLE_DEVICES``), else
    the ``cuda_devices`` torch sees; None when it has none (a CPU rank that no GPU was declared for).

    The node's GPU count is the job's (``CLUSTERCTL_GPUS_PER_NODE``, the batch script's), else Slurm's
    ``SLURM_GPUS_ON_NODE``; the ranks on the node, ``SLURM_STEP_TASKS_PER_NODE`` at ``SLURM_NODEID``, else
    Open MPI's or torchrun's local size. On a CPU node of a GPU-shaped Slurm the rank computes on CPUs
    but still says which GPU it would have used.

    Raises:
        GpuChoiceError: as ``choose_gpu``.
    """
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip() not in _NO_GPU:
        visible = [entry.strip() for entry in listed.split(",") if entry.strip()]
    elif listed is None and cuda_devices > 0:
        visible = [str(i) for i in range(cuda_devices)]
    else:
        return None
    gpus = next(
        (
            int(environ[n])
            for n in ("CLUSTERCTL_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE")
            if environ.get(n, "").isdigit()
        ),
        len(visible),
    )
    size = None
    if "SLURM_STEP_TASKS_PER_NODE" in environ and environ.get("SLURM_NODEID", "").isdigit():
        size = tasks_on_node(environ["SLURM_STEP_TASKS_PER_NODE"], int(environ["SLURM_NODEID"]))
    for name in ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"):
        if size is None and environ.get(name, "").isdigit():
            size = int(environ[name])
    return choose_gpu(local_rank, size or local_rank + 1, visible, gpus, environ.get("SLURM_DISTRIBUTION"))


# The line each rank prints before training, read by the judge (clusterctl.run.judge).
PLACEMENT_MARK = "CLUSTERCTL_PLACEMENT"


def placement_line(
    environ: Mapping[str, str],
    rank: int,
    local_rank: int,
    choice: GpuChoice,
    cpus: Sequence[int],
    uuid: str | None,
) -> str:
    """``CLUSTERCTL_PLACEMENT {json}``: the rank, its node, the GPU it uses (``uuid`` where torch has one),
    the GPUs Slurm's binding left it (those of its CPUs' socket) and the CPUs it is bound to."""
    node = environ.get("SLURMD_NODENAME") or environ.get("SLURM_NODEID") or socket.gethostname()
    fields = {
        "rank": rank,
        "local_rank": local_rank,
        "node": node,
        "gpu": choice.gpu,
        "uuid": uuid,
        "near": list(choice.visible) if "SLURM_STEP_ID" in environ else None,
        "cpus": sorted(cpus),
    }
    return f"{PLACEMENT_MARK} {json.dumps(fields, separators=(',', ':'))}"
