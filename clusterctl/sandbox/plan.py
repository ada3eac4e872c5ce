"""What a sandbox is made of, computed from its name, node count and subnet alone (pure).

Every object ``up`` creates on the local engine is named here and carries the label
``io.clusterctl.sandbox=<name>``; ``down`` removes by that label, so it finds exactly what ``up``
made, even after an interrupted ``up``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from clusterctl.errors import InputError

LABEL = "io.clusterctl.sandbox"
DEFAULT_NAME = "sandbox"
# A private /24 unlikely to be in use (docker's own pools are 172.17-31.x and 192.168.x).
DEFAULT_SUBNET = "10.213.0.0/24"
# Node addresses start at .11: .1 is the bridge gateway, and the gap leaves room to recognise them.
FIRST_HOST = 11
# Beyond this a laptop's 2-8 cores cannot run the nodes' engines usefully; the limit keeps mistakes cheap.
MAX_NODES = 32
# Light nodes (sshd, optionally slurmd; no engine) cost a few MiB each: the scale bed goes up to what the
# default /24 holds from FIRST_HOST on.
MAX_LIGHT_NODES = 240
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")


@dataclass(frozen=True)
class NodePlan:
    """One node container: its inventory name (also its hostname), container, volume and address."""

    index: int
    name: str
    container: str
    volume: str
    address: str


@dataclass(frozen=True)
class SandboxPlan:
    """The network and node containers of one sandbox."""

    name: str
    subnet: ipaddress.IPv4Network
    network: str
    nodes: tuple[NodePlan, ...]

    @property
    def shared_volume(self) -> str:
        """The volume every node mounts as shared storage (``up --slurm``: the run directory)."""
        return f"{self.network}-shared"

    @property
    def labels(self) -> dict[str, str]:
        """The labels on everything this sandbox creates."""
        return {LABEL: self.name}


def check_name(name: str) -> str:
    """``name`` if it can name a sandbox (a hostname label of at most 40 characters).

    Raises:
        InputError: it cannot.
    """
    if not _NAME.fullmatch(name):
        raise InputError(
            f"--name {name!r}: a sandbox name is lower-case letters, digits and '-', at most 40 characters, "
            "not starting or ending with '-'. Fix: pass e.g. --name sandbox."
        )
    return name


def plan_sandbox(name: str, nodes: int, subnet: str = DEFAULT_SUBNET, *, light: bool = False) -> SandboxPlan:
    """The plan of a sandbox of ``nodes`` nodes on ``subnet`` (``light``: nodes without an engine, so
    up to ``MAX_LIGHT_NODES`` of them).

    Raises:
        InputError: bad name, node count or subnet; the message names the value and the fix.
    """
    check_name(name)
    most = MAX_LIGHT_NODES if light else MAX_NODES
    if not 1 <= nodes <= most:
        hint = "" if light else f", or add --light for a scale bed of up to {MAX_LIGHT_NODES} light nodes"
        raise InputError(
            f"--nodes {nodes}: a {'light ' if light else ''}sandbox has between 1 and {most} nodes. Fix: pass "
            f"e.g. --nodes 2{hint}."
        )
    try:
        network = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as exc:
        raise InputError(
            f"--subnet {subnet!r} is not an IPv4 network ({exc}). Fix: pass a network such as "
            f"{DEFAULT_SUBNET} (no host bits set)."
        ) from None
    last = FIRST_HOST + nodes - 1
    if last >= network.num_addresses - 1:
        raise InputError(
            f"--subnet {subnet}: {nodes} nodes need addresses up to .{last}, beyond this network. Fix: "
            "use a larger network, e.g. a /24."
        )
    prefix = f"clusterctl-{name}"
    node_plans = tuple(
        NodePlan(
            index=i,
            name=f"node{i}",
            container=f"{prefix}-node{i}",
            volume=f"{prefix}-node{i}-docker",
            address=str(network.network_address + FIRST_HOST + i - 1),
        )
        for i in range(1, nodes + 1)
    )
    return SandboxPlan(name=name, subnet=network, network=prefix, nodes=node_plans)


@dataclass(frozen=True)
class CpuPlan:
    """Which CPUs each node (in plan order) may use, as cpuset lists (``0-3``), and whether nodes share.

    ``shared`` is False when every node has its own, equally large, disjoint set: a run on k nodes
    then has k times the CPUs of a run on one, and the scaling figure measures communication. It is
    True only with more nodes than CPUs: every node then gets every CPU, and the nodes contend for them
    alike.
    """

    cpusets: tuple[str, ...]
    shared: bool


def format_cpu_list(cpus: Sequence[int]) -> str:
    """``cpus`` as a kernel CPU list, consecutive runs folded: [0, 1, 2, 5] -> ``0-2,5``."""
    ordered = sorted(set(cpus))
    runs: list[list[int]] = []
    for cpu in ordered:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def plan_cpus(allowed: Sequence[int], nodes: int) -> CpuPlan:
    """Equal, disjoint shares of the ``allowed`` CPUs for ``nodes`` nodes (pure).

    Each node gets ``len(allowed) // nodes`` consecutive CPUs; the remainder stays unused, so that
    no node is faster than another. With more nodes than CPUs, every node gets every CPU and the plan
    says they are ``shared``: dealt one CPU each round-robin, two nodes on the same CPU would make
    their pair's collective several times slower than the others' (`check pairs` named the pair a slow
    link), while on every CPU no node or pair is favoured.

    Raises:
        ValueError: no CPU is allowed, or ``nodes`` is below 1.
    """
    cpus = sorted(set(allowed))
    if not cpus or nodes < 1:
        raise ValueError(f"cannot share {len(cpus)} CPU(s) among {nodes} node(s)")
    if nodes > len(cpus):
        return CpuPlan((format_cpu_list(cpus),) * nodes, shared=True)
    share = len(cpus) // nodes
    return CpuPlan(
        tuple(format_cpu_list(cpus[i * share : (i + 1) * share]) for i in range(nodes)), shared=False
    )


def plan_shaped_cpus(allowed: Sequence[int], nodes: int, per_node: int) -> CpuPlan:
    """Exactly ``per_node`` of the ``allowed`` CPUs for each of ``nodes`` nodes (pure): a node whose
    declared shape needs that many real CPUs (Slurm binds tasks to them). Disjoint runs while the CPUs
    last for every node; else every node gets the same first ``per_node`` CPUs, and the plan says the
    nodes share them.

    Raises:
        ValueError: fewer than ``per_node`` CPUs are allowed, or ``nodes`` is below 1.
    """
    cpus = sorted(set(allowed))
    if len(cpus) < per_node or nodes < 1:
        raise ValueError(f"cannot give {nodes} node(s) {per_node} CPUs each out of {len(cpus)} CPU(s)")
    if len(cpus) >= per_node * nodes:
        return CpuPlan(
            tuple(format_cpu_list(cpus[i * per_node : (i + 1) * per_node]) for i in range(nodes)),
            shared=False,
        )
    return CpuPlan(tuple(format_cpu_list(cpus[:per_node]) for _ in range(nodes)), shared=nodes > 1)
