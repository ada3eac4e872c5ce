"""What a sandbox is made of, computed from its name, node count and subnet alone (pure).

Every object ``up`` creates on the local engine is named here and carries the label
``io.clusterctl.sandbox=<name>``; ``down`` removes by that label, so it finds exactly what ``up``
made, even after an interrupted ``up``.
"""

from __future__ import annotations

import ipaddress
import re
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


def plan_sandbox(name: str, nodes: int, subnet: str = DEFAULT_SUBNET) -> SandboxPlan:
    """The plan of a sandbox of ``nodes`` nodes on ``subnet``.

    Raises:
        InputError: bad name, node count or subnet; the message names the value and the fix.
    """
    check_name(name)
    if not 1 <= nodes <= MAX_NODES:
        raise InputError(
            f"--nodes {nodes}: a sandbox has between 1 and {MAX_NODES} nodes. Fix: pass e.g. --nodes 2."
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
