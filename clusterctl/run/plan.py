"""The launch plan: the mpirun command that runs a workload across the cluster. Pure.

Everything comes from the validated inventory and the run options, so no value here can carry shell:
the inventory refuses addresses, interfaces and paths that are not what they claim to be. The command
is an argv list; ``LaunchPlan.shell_command`` quotes it once, for display and pasting.

The flags follow the whitepaper's multi-node command (its Appendix), plus what a container needs:
the cluster key and known_hosts mounted at ``CONTAINER_SSH_DIR``, strict host-key checking, and
``--tag-output`` so rank 0's lines can be told apart.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterctl.errors import InputError
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR, CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Node, RunDefaults
from clusterctl.versions import version_tuple
from clusterctl.workloads import get_workload
from clusterctl.workloads.images import check_image_runs

if TYPE_CHECKING:
    from clusterctl.workloads.base import Workload

# Environment every rank needs from the launching shell (the image's tool and library paths). The
# cpu image sets no LD_LIBRARY_PATH, and mpirun warns about a -x of an unset variable.
FORWARDED_ENV = ("PATH",)
GPU_FORWARDED_ENV = ("LD_LIBRARY_PATH",)
# DDP rendezvous port on rank 0 (MASTER_PORT): torch's customary default, what a plan shows before it runs.
# Each run gets its own (``rendezvous_ports``, checked free on rank 0's node by ``run.rendezvous``), so two
# runs on the same nodes, or a port some other program holds, do not collide.
DDP_MASTER_PORT = 29500
# The ports a run's rendezvous is drawn from: torch's default and up, below Linux's ephemeral range
# (32768-60999 by default), where the kernel picks outgoing connections' ports.
RENDEZVOUS_PORTS = range(DDP_MASTER_PORT, 32768)
# Ports a run tries, its own first, where some are in use (the ssh launcher's check, the batch script's).
RENDEZVOUS_TRIES = 8
# What every rank of the ssh launcher runs first: it binds the rank to its GPU's CPUs, then execs the
# rank's command (clusterctl/payload/bind.py; mpirun itself keeps the whitepaper's --bind-to none).
BIND_WRAPPER = ("python3", f"{CONTAINER_PAYLOAD_DIR}/bind.py", "--")


class RunOptions(BaseModel):
    """What to run: a workload, on how many nodes, with which settings (inventory defaults + flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(description="Registered workload name, e.g. resnet50.")
    nodes: int = Field(ge=1, description="Nodes used: the primary and nodes-1 secondaries.")
    ranks_per_node: int | None = Field(
        None, ge=1, le=256, description="Ranks per node; None: each node's own count (its GPUs, 1 on CPU)."
    )
    settings: RunDefaults = Field(description="Benchmark settings after command-line overrides.")


def run_options(
    inventory: Inventory,
    workload: str,
    *,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    **overrides: Any,
) -> RunOptions:
    """Run options from the workload's defaults and the inventory's run settings for it
    (``Inventory.run_settings``), with the given (non-None) overrides applied.

    Overrides are validated like the inventory, so a bad value is an error here, not in a shell.
    Override names are ``RunDefaults`` fields, which the command line spells as options
    (``batch_size`` is ``--batch-size``); the error names the option.

    Raises:
        InputError: an override is invalid or more nodes are asked for than the inventory has.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    base = inventory.run_settings(workload, get_workload(workload).defaults(inventory))
    try:
        # Lax: a sweep's values arrive as command-line text ("128"), not as YAML numbers.
        settings = RunDefaults.model_validate({**base, **given}, strict=False)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{str(e['loc'][0]).replace('_', '-')} {e['input']!r}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors()
        )
        raise InputError(
            f"invalid run option {problems}. Fix: give a value the option accepts (`--help` lists them)."
        ) from None
    count = nodes if nodes is not None else len(inventory.nodes)
    if not 1 <= count <= len(inventory.nodes):
        raise InputError(
            f"--nodes {count}: the inventory has {len(inventory.nodes)} node(s); use 1 to {len(inventory.nodes)}."
        )
    return RunOptions(workload=workload, nodes=count, ranks_per_node=ranks_per_node, settings=settings)


def plan_run(
    inventory: Inventory,
    workload: str,
    *,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    **overrides: Any,
) -> LaunchPlan:
    """The launch plan of ``workload`` on ``inventory``: ``run_options`` and ``build_plan`` in one call.

    Raises:
        InputError: an unknown workload, an invalid override, or a count the inventory cannot hold.
    """
    spec = get_workload(workload)
    options = run_options(inventory, workload, nodes=nodes, ranks_per_node=ranks_per_node, **overrides)
    return build_plan(inventory, options, spec)


class HostSlots(BaseModel):
    """One node in the launch: its name, its fabric address and the ranks it runs."""

    model_config = ConfigDict(frozen=True)

    node: str
    address: str
    slots: int


class LaunchPlan(BaseModel):
    """The mpirun command for one run, and what it was built from."""

    model_config = ConfigDict(frozen=True)

    options: RunOptions
    hosts: list[HostSlots]
    env: dict[str, str] = Field(description="Variables set on every rank (passed with -x NAME=VALUE).")
    argv: list[str] = Field(description="The whole command: mpirun, its flags, the workload's argv.")
    rank_argv: list[str] = Field(
        description="What every rank runs (the end of argv, after the binding wrapper where there is one): "
        "the slurm launcher's srun starts it directly and binds through Slurm."
    )
    gpu: bool = Field(description="Whether the ranks run on GPUs (NCCL) or CPUs (Gloo/MPI).")

    @property
    def world_size(self) -> int:
        """Total ranks (devices) in the run."""
        return sum(h.slots for h in self.hosts)

    def shell_command(self) -> str:
        """The command quoted for a POSIX shell, ready to paste."""
        return shlex.join(self.argv)


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


def mca_params(inventory: Inventory) -> list[str]:
    """Open MPI's own transport, made explicit: ``-mca NAME VALUE`` pairs.

    MPI carries only Horovod's and the launcher's small control messages (NCCL moves the gradients),
    so it uses TCP on the fabric interface with the ob1 PML on every image: no openib BTL (gone in
    Open MPI 5, and a source of "no active ports" warnings before), no dependence on whether the
    image's Open MPI was built with UCX. ``oob_tcp_if_include`` pins the daemons' out-of-band
    channel to the same interface: with ``--network=host`` every node has ``docker0`` (the same
    172.17.0.1 everywhere), and Open MPI hangs when it picks such a non-routed interface (Horovod's
    docs/mpi.rst).
    """
    interface = inventory.primary.fabric.interface
    pairs = [
        ("plm_rsh_args", rsh_args(inventory)),
        ("pml", "ob1"),
        ("btl", "^openib"),
        ("btl_tcp_if_include", interface),
        ("oob_tcp_if_include", interface),
    ]
    return [arg for name, value in pairs for arg in ("-mca", name, value)]


def rsh_args(inventory: Inventory) -> str:
    """The ssh options mpirun uses to start ranks in the other containers (one string, as MPI wants)."""
    return " ".join(
        [
            f"-p {inventory.container.sshd_port}",
            f"-i {CONTAINER_SSH_DIR}/id_ed25519",
            f"-o UserKnownHostsFile={CONTAINER_SSH_DIR}/known_hosts",
            "-o StrictHostKeyChecking=yes",
            "-o ConnectionAttempts=10",
        ]
    )


def rendezvous_env(settings: RunDefaults, master_addr: str) -> dict[str, str]:
    """torch's MASTER_ADDR / MASTER_PORT for a DDP or FSDP run (rank 0's address); nothing for Horovod."""
    if settings.framework not in ("ddp", "fsdp"):
        return {}
    return {"MASTER_ADDR": master_addr, "MASTER_PORT": str(DDP_MASTER_PORT)}


def rendezvous_ports(run_id: str, count: int = RENDEZVOUS_TRIES) -> list[int]:
    """The ports the run ``run_id`` tries for its rendezvous, first choice first: ``count`` consecutive
    ports of ``RENDEZVOUS_PORTS`` (wrapping) from one that a hash of ``run_id`` picks."""
    first = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")
    return [RENDEZVOUS_PORTS[(first + i) % len(RENDEZVOUS_PORTS)] for i in range(count)]


def with_rendezvous_port(plan: LaunchPlan, port: int) -> LaunchPlan:
    """``plan`` with rank 0's rendezvous on ``port`` (``MASTER_PORT`` and mpirun's ``-x``); a plan without
    a rendezvous (Horovod) unchanged.

    Raises:
        InputError: ``port`` is not one of ``RENDEZVOUS_PORTS``.
    """
    if "MASTER_PORT" not in plan.env:
        return plan
    if port not in RENDEZVOUS_PORTS:
        raise InputError(
            f"rendezvous port {port!r} is outside {RENDEZVOUS_PORTS.start}-{RENDEZVOUS_PORTS.stop - 1}. "
            "Fix: pick one in that range (below the kernel's ephemeral ports)."
        )
    old = f"MASTER_PORT={plan.env['MASTER_PORT']}"
    argv = [f"MASTER_PORT={port}" if arg == old else arg for arg in plan.argv]
    return plan.model_copy(update={"env": {**plan.env, "MASTER_PORT": str(port)}, "argv": argv})


def binds_ranks(inventory: Inventory) -> bool:
    """Whether the ssh launcher's ranks start through ``BIND_WRAPPER`` (Python 3 in the image).

    The paper-2020 image reproduces the whitepaper's command as it was (TensorFlow 1.14 on Python 2.7,
    ``--bind-to none`` and nothing else); every other image binds each rank near its GPU.
    """
    return inventory.image.profile != "paper-2020"


def build_plan(inventory: Inventory, options: RunOptions, workload: Workload) -> LaunchPlan:
    """The launch plan for ``workload`` with ``options`` on ``inventory``.

    Raises:
        InputError: the inventory's image cannot run the workload, more ranks per node than a node
            has GPUs, or settings the workload refuses (``Workload.check_plan``).
    """
    check_image_runs(workload, inventory)
    nodes = select_nodes(inventory, options.nodes)
    hosts = [HostSlots(node=n.name, address=n.fabric_ip, slots=_slots(n, options)) for n in nodes]
    env = {**nccl_env(inventory, options.settings), **rendezvous_env(options.settings, hosts[0].address)}
    gpu = inventory.primary.gpus.count > 0
    forwarded = [*FORWARDED_ENV, *(GPU_FORWARDED_ENV if gpu else ()), *workload.forwarded_env(inventory)]
    world = sum(h.slots for h in hosts)
    workload.check_plan(inventory, options.settings, world)
    argv = [
        "mpirun",
        "-np",
        str(world),
        "-H",
        ",".join(f"{h.address}:{h.slots}" for h in hosts),
        "--allow-run-as-root",
        "--tag-output",
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        *mca_params(inventory),
    ]
    for name, value in env.items():
        argv += ["-x", f"{name}={value}"]
    for name in forwarded:
        argv += ["-x", name]
    rank_argv = workload.argv(options.settings, gpu=gpu)
    wrapper = list(BIND_WRAPPER) if binds_ranks(inventory) else []
    return LaunchPlan(
        options=options,
        hosts=hosts,
        env=env,
        argv=[*argv, *wrapper, *rank_argv],
        rank_argv=rank_argv,
        gpu=gpu,
    )


def _slots(node: Node, options: RunOptions) -> int:
    if options.ranks_per_node is None:
        return node.ranks
    if node.gpus.count and options.ranks_per_node > node.gpus.count:
        raise InputError(
            f"--ranks-per-node {options.ranks_per_node} > {node.gpus.count} GPUs on {node.name}; "
            "run at most one rank per GPU."
        )
    return options.ranks_per_node
