"""The launch plan: the mpirun command that runs a workload across the cluster. Pure.

Everything comes from the validated inventory and the run options, so no value here can carry shell:
the inventory refuses addresses, interfaces and paths that are not what they claim to be. The command
is an argv list; ``LaunchPlan.shell_command`` quotes it once, for display and pasting.

The flags follow the whitepaper's multi-node command (its Appendix), plus what a container needs:
the cluster key and known_hosts mounted at ``CONTAINER_SSH_DIR``, strict host-key checking, and
``--tag-output`` so rank 0's lines can be told apart.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.errors import InputError
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Node, RunDefaults

if TYPE_CHECKING:
    from clusterctl.workloads.base import Workload

# Environment every rank needs from the launching shell (the image's tool and library paths). The
# cpu image sets no LD_LIBRARY_PATH, and mpirun warns about a -x of an unset variable.
FORWARDED_ENV = ("PATH",)
GPU_FORWARDED_ENV = ("LD_LIBRARY_PATH",)


class RunOptions(BaseModel):
    """What to run: a workload, on how many nodes, with which settings (inventory defaults + flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(description="Registered workload name, e.g. resnet50.")
    nodes: int = Field(ge=1, description="Nodes used: the primary and nodes-1 secondaries.")
    ranks_per_node: int | None = Field(
        None, ge=1, description="Ranks per node; None: each node's own count (its GPUs, 1 on CPU)."
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
    """Run options from the inventory's run defaults, with the given (non-None) overrides applied.

    Overrides are validated like the inventory, so a bad value is an error here, not in a shell.

    Raises:
        InputError: an override is invalid or more nodes are asked for than the inventory has.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        # Lax: a sweep's values arrive as command-line text ("128"), not as YAML numbers.
        settings = RunDefaults.model_validate({**inventory.run.model_dump(), **given}, strict=False)
    except ValueError as exc:
        raise InputError(f"invalid run option: {exc}") from None
    count = nodes if nodes is not None else len(inventory.nodes)
    if not 1 <= count <= len(inventory.nodes):
        raise InputError(
            f"--nodes {count}: the inventory has {len(inventory.nodes)} node(s); use 1 to {len(inventory.nodes)}."
        )
    return RunOptions(workload=workload, nodes=count, ranks_per_node=ranks_per_node, settings=settings)


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


def nccl_env(inventory: Inventory, settings: RunDefaults) -> dict[str, str]:
    """NCCL and Horovod variables for the ranks: fabric, GPUDirect level and NET debug output."""
    primary = inventory.primary
    env = {
        "NCCL_SOCKET_IFNAME": primary.fabric.interface,
        "NCCL_IB_DISABLE": "0" if primary.rdma else "1",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "NET",
        "HOROVOD_MPI_THREADS_DISABLE": "1",
    }
    if primary.rdma and primary.fabric.hca:
        env["NCCL_IB_HCA"] = primary.fabric.hca
    if settings.gdr_level is not None:
        env["NCCL_NET_GDR_LEVEL"] = str(settings.gdr_level)
    return env


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


def build_plan(inventory: Inventory, options: RunOptions, workload: Workload) -> LaunchPlan:
    """The launch plan for ``workload`` with ``options`` on ``inventory``.

    Raises:
        InputError: more ranks per node than a node has GPUs.
    """
    nodes = select_nodes(inventory, options.nodes)
    hosts = [HostSlots(node=n.name, address=n.fabric_ip, slots=_slots(n, options)) for n in nodes]
    env = nccl_env(inventory, options.settings)
    gpu = inventory.primary.gpus.count > 0
    forwarded = [*FORWARDED_ENV, *(GPU_FORWARDED_ENV if gpu else ()), *workload.forwarded_env(inventory)]
    world = sum(h.slots for h in hosts)
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
        "-mca",
        "plm_rsh_args",
        rsh_args(inventory),
        "-mca",
        "btl_tcp_if_include",
        inventory.primary.fabric.interface,
    ]
    for name, value in env.items():
        argv += ["-x", f"{name}={value}"]
    for name in forwarded:
        argv += ["-x", name]
    argv += workload.argv(options.settings, gpu=gpu, master_addr=hosts[0].address)
    return LaunchPlan(options=options, hosts=hosts, env=env, argv=argv, gpu=gpu)


def _slots(node: Node, options: RunOptions) -> int:
    if options.ranks_per_node is None:
        return node.ranks
    if node.gpus.count and options.ranks_per_node > node.gpus.count:
        raise InputError(
            f"--ranks-per-node {options.ranks_per_node} > {node.gpus.count} GPUs on {node.name}; "
            "run at most one rank per GPU."
        )
    return options.ranks_per_node
