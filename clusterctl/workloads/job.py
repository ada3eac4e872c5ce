"""The job: what a run starts on which nodes, in no launcher's syntax. Pure.

A ``Job`` says which hosts run how many ranks, what every rank runs (``rank_argv``), the variables every
rank gets (``env``: NCCL's fabric settings, Horovod's, torch's rendezvous) and those it takes from the
shell that starts it (``forwarded``), the parameters of the ranks' own MPI library (``mpi``: Open MPI's
transport), and whether each rank is bound near its GPU (``bind``). A launcher
(``clusterctl.run.launchers``: mpirun, srun) turns it into the command that starts the ranks; a backend
(``clusterctl.run.backends``: ssh, slurm) runs that command. The workloads build jobs
(``clusterctl.workloads.build``) and read them when they judge a run's output (``Workload.sanity``).

Everything comes from the validated inventory and the run options, so no value here can carry shell:
the inventory refuses addresses, interfaces and paths that are not what they claim to be.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.inventory import Inventory, Node, RunDefaults
from clusterctl.versions import version_tuple

# Environment every rank needs from the launching shell (the image's tool and library paths). The
# cpu image sets no LD_LIBRARY_PATH, and mpirun warns about a -x of an unset variable.
FORWARDED_ENV = ("PATH",)
GPU_FORWARDED_ENV = ("LD_LIBRARY_PATH",)
# DDP rendezvous port on rank 0 (MASTER_PORT): torch's customary default, what a job shows before it runs.
# Each run gets its own (``clusterctl.run.plan.rendezvous_ports``, checked free by the backend), so two
# runs on the same nodes, or a port some other program holds, do not collide.
DDP_MASTER_PORT = 29500


class RunOptions(BaseModel):
    """What to run: a workload, on how many nodes, with which settings (inventory defaults + flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(description="Registered workload name, e.g. resnet50.")
    nodes: int = Field(ge=1, description="Nodes used: the primary and nodes-1 secondaries.")
    ranks_per_node: int | None = Field(
        None, ge=1, le=256, description="Ranks per node; None: each node's own count (its GPUs, 1 on CPU)."
    )
    settings: RunDefaults = Field(description="Benchmark settings after command-line overrides.")


class HostSlots(BaseModel):
    """One node in the job: its name, its fabric address and the ranks it runs."""

    model_config = ConfigDict(frozen=True)

    node: str
    address: str
    slots: int


class Job(BaseModel):
    """One run of a workload across its nodes, and what it was built from; no launcher's syntax."""

    model_config = ConfigDict(frozen=True)

    options: RunOptions
    hosts: list[HostSlots]
    env: dict[str, str] = Field(
        description="Variables set on every rank, in order: NCCL's, Horovod's, torch's rendezvous "
        "(MASTER_ADDR, MASTER_PORT) where the framework has one."
    )
    forwarded: list[str] = Field(description="Variables every rank takes from the shell that starts it.")
    mpi: dict[str, str] = Field(
        description="Open MPI's parameters for the ranks' own MPI (its transport), by MCA name."
    )
    rank_argv: list[str] = Field(description="What every rank runs.")
    bind: bool = Field(description="Whether each rank is bound to the CPUs near its GPU.")
    gpu: bool = Field(description="Whether the ranks run on GPUs (NCCL) or CPUs (Gloo/MPI).")

    @property
    def world_size(self) -> int:
        """Total ranks (devices) in the run."""
        return sum(h.slots for h in self.hosts)

    @property
    def rendezvous_port(self) -> int | None:
        """Rank 0's rendezvous port (DDP, FSDP); None: the job has no rendezvous (Horovod)."""
        port = self.env.get("MASTER_PORT")
        return None if port is None else int(port)


def select_nodes(inventory: Inventory, count: int) -> list[Node]:
    """The primary and the first ``count - 1`` secondaries, in inventory order."""
    return [inventory.primary, *inventory.secondaries[: count - 1]]


# The first NCCL whose NCCL_SOCKET_IFNAME / NCCL_IB_HCA understand a leading '=' (exact names):
# matchIfList's searchExact appears in v2.5.6-1 (src/include/socket.h, src/transport/net_ib.cc).
NCCL_EXACT_NAMES_SINCE = (2, 5, 6)


def exact_names(inventory: Inventory, names: Sequence[str]) -> str:
    """``names`` as an NCCL interface/HCA list that matches exactly: ``=a,b``.

    NCCL reads these lists as name prefixes (``mlx5_1`` also selects ``mlx5_10``...) unless they
    start with ``=``. An image pinned to an NCCL older than 2.5.6, which knows no ``=``, gets the
    plain list (there ``=mlx5_0`` would match no device at all).
    """
    version = version_tuple(inventory.image.versions.nccl)
    old = version is not None and version < NCCL_EXACT_NAMES_SINCE
    return ("" if old else "=") + ",".join(names)


# What NCCL must print for a run to be judged: see ``nccl_env``.
NCCL_DEBUG_SUBSYS = "INIT,NET,TUNING"


def nccl_env(inventory: Inventory, settings: RunDefaults) -> dict[str, str]:
    """NCCL and Horovod variables for the ranks: fabric, GPUDirect level and the debug output the
    run is judged by.

    ``NCCL_SOCKET_IFNAME`` and ``NCCL_IB_HCA`` name exactly the inventory's interface and HCAs
    (``exact_names``). ``NCCL_DEBUG_SUBSYS`` asks for INIT (rings, trees, NVLS/CollNet set-up), NET
    (the transport and the HCA each channel used) and TUNING (the algorithm and protocol chosen per
    collective): the proof by counters sets its floor by the algorithm. No HCA in the inventory: ``NCCL_IB_HCA`` stays unset and NCCL uses every HCA
    it finds. The fabric settings are the same on every node (the inventory refuses nodes that
    differ), so the primary's are every rank's.
    """
    fabric = inventory.primary.fabric
    rdma = inventory.primary.rdma
    env = {
        "NCCL_SOCKET_IFNAME": exact_names(inventory, [fabric.interface]),
        "NCCL_IB_DISABLE": "0" if rdma else "1",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": NCCL_DEBUG_SUBSYS,
        "HOROVOD_MPI_THREADS_DISABLE": "1",
    }
    if rdma and fabric.hca:
        env["NCCL_IB_HCA"] = exact_names(inventory, fabric.hca)
    if fabric.gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(fabric.gid_index)
    if fabric.traffic_class is not None:
        env["NCCL_IB_TC"] = str(fabric.traffic_class)
    if settings.gdr_level is not None:
        env["NCCL_NET_GDR_LEVEL"] = str(settings.gdr_level)
    return env


def mpi_transport(inventory: Inventory) -> dict[str, str]:
    """Open MPI's own transport for the ranks, made explicit, by MCA parameter name.

    MPI carries only Horovod's and the launcher's small control messages (NCCL moves the gradients),
    so it uses TCP on the fabric interface with the ob1 PML on every image: no openib BTL (gone in
    Open MPI 5, and a source of "no active ports" warnings before), no dependence on whether the
    image's Open MPI was built with UCX. ``oob_tcp_if_include`` pins the daemons' out-of-band
    channel to the same interface: with ``--network=host`` every node has ``docker0`` (the same
    172.17.0.1 everywhere), and Open MPI hangs when it picks such a non-routed interface (Horovod's
    docs/mpi.rst).
    """
    interface = inventory.primary.fabric.interface
    return {
        "pml": "ob1",
        "btl": "^openib",
        "btl_tcp_if_include": interface,
        "oob_tcp_if_include": interface,
    }


def rendezvous_env(settings: RunDefaults, master_addr: str) -> dict[str, str]:
    """torch's MASTER_ADDR / MASTER_PORT for a DDP or FSDP run (rank 0's address); nothing for Horovod."""
    if settings.framework not in ("ddp", "fsdp"):
        return {}
    return {"MASTER_ADDR": master_addr, "MASTER_PORT": str(DDP_MASTER_PORT)}


def binds_ranks(inventory: Inventory) -> bool:
    """Whether each rank is bound near its GPU (the payload's ``bind.py``; Python 3 in the image).

    The paper-2020 image reproduces the whitepaper's command as it was (TensorFlow 1.14 on Python 2.7,
    ``--bind-to none`` and nothing else); every other image binds each rank near its GPU.
    """
    return inventory.image.profile != "paper-2020"
