"""The inventory's cross-field rules: what no single field can check (unique names, one primary, one subnet).

Each rule is one function from the validated ``Inventory`` to its problems, (location, message) pairs
whose message reads "what is wrong; what to do". Loading (``load.validate_document``) runs ``RULES``
after pydantic validated every field; a broken rule raises ``InventoryRuleError`` with the location of
each problem, which loading turns into file, line and field. Adding a rule is writing its function and listing it in ``RULES``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from clusterctl.inventory.models import Inventory, Node

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]
Rule = Callable[["Inventory"], list[Problem]]

_Key = TypeVar("_Key", bound=Hashable)


class InventoryRuleError(Exception):
    """Raised from validation for rules that span fields; carries (location, message) pairs.

    Not a ValueError on purpose: pydantic passes it through untouched, keeping the locations.
    """

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


def _repeats(keyed: Iterable[tuple[int, _Key]]) -> Iterator[tuple[int, _Key, int]]:
    """``(index, key, first index of key)`` for each ``(index, key)`` whose key came before, in order."""
    first: dict[_Key, int] = {}
    for index, key in keyed:
        if key in first:
            yield index, key, first[key]
        else:
            first[key] = index


def _primary(inv: Inventory) -> Node | None:
    """The first node with role primary; None when no node has it."""
    return next((n for n in inv.nodes if n.role == "primary"), None)


def _fabric_addresses(inv: Inventory) -> list[tuple[int, ipaddress.IPv4Interface]]:
    """``(node index, fabric address)`` of every node that has a fabric address, in file order."""
    return [(i, n.fabric.address) for i, n in enumerate(inv.nodes) if n.fabric.address is not None]


# --------------------------------------------------------------------------- nodes


def unique_node_names(inv: Inventory) -> list[Problem]:
    """Every node has its own name."""
    return [
        (
            ("nodes", i, "name"),
            f"duplicate node name {name!r} (also nodes[{first}]); give every node a unique name",
        )
        for i, name, first in _repeats(enumerate(n.name for n in inv.nodes))
    ]


def unique_addresses(inv: Inventory) -> list[Problem]:
    """Every node has its own management address (DNS names are case-insensitive: GPU01 and gpu01 are one host)."""
    return [
        (
            ("nodes", i, "address"),
            f"duplicate address {inv.nodes[i].address!r} (also nodes[{first}], names compared "
            "ignoring case); every node needs its own management address",
        )
        for i, _, first in _repeats(enumerate(n.address.lower() for n in inv.nodes))
    ]


def slots_within_gpus(inv: Inventory) -> list[Problem]:
    """A GPU node runs at most one rank per GPU."""
    return [
        (
            ("nodes", i, "slots"),
            f"slots {node.slots} > {node.gpus.count} GPUs on {node.name}; set slots to at most the GPU count (one rank per GPU)",
        )
        for i, node in enumerate(inv.nodes)
        if node.gpus.count and node.slots and node.slots > node.gpus.count
    ]


def rdma_has_fabric_address(inv: Inventory) -> list[Problem]:
    """A node on InfiniBand or RoCE has a fabric address."""
    return [
        (
            ("nodes", i, "fabric", "address"),
            f"{node.name} has a {node.fabric.kind} fabric but no fabric address; add e.g. address: 192.168.11.{i + 1}/24",
        )
        for i, node in enumerate(inv.nodes)
        if node.rdma and node.fabric.address is None
    ]


def one_primary(inv: Inventory) -> list[Problem]:
    """Exactly one node has role primary."""
    primaries = [i for i, n in enumerate(inv.nodes) if n.role == "primary"]
    if not primaries:
        return [
            (
                ("nodes",),
                "no node has role: primary; mark exactly one node (the one that runs mpirun) with role: primary",
            )
        ]
    return [
        (
            ("nodes", i, "role"),
            f"a second primary ({inv.nodes[primaries[0]].name} is already primary); set role: secondary on all nodes but one",
        )
        for i in primaries[1:]
    ]


# --------------------------------------------------------------------------- the fabric


def one_fabric_subnet(inv: Inventory) -> list[Problem]:
    """Every fabric address is in the subnet of the first node that has one."""
    addresses = _fabric_addresses(inv)
    if not addresses:
        return []
    first_index, first_address = addresses[0]
    network = first_address.network
    return [
        (
            ("nodes", i, "fabric", "address"),
            f"{address} is not in the subnet {network} of {inv.nodes[first_index].name}; put every fabric address in one subnet",
        )
        for i, address in addresses
        if address.network != network
    ]


def unique_fabric_addresses(inv: Inventory) -> list[Problem]:
    """Every node has its own fabric address."""
    return [
        (
            ("nodes", i, "fabric", "address"),
            f"duplicate fabric address {ip} (also nodes[{first}]); give every node its own",
        )
        for i, ip, first in _repeats((i, str(address.ip)) for i, address in _fabric_addresses(inv))
    ]


def one_fabric_kind(inv: Inventory) -> list[Problem]:
    """Every node is on the same kind of fabric."""
    kinds = {n.fabric.kind for n in inv.nodes}
    if len(kinds) > 1:
        return [
            (("nodes",), f"nodes mix fabric kinds {sorted(kinds)}; use one fabric kind for the whole cluster")
        ]
    return []


def roce_settings_on_roce_only(inv: Inventory) -> list[Problem]:
    """``gid_index`` and ``traffic_class`` are set on RoCE nodes only (NCCL applies them to RoCE alone).

    Checked once a node is the primary, like ``fabric_same_as_primary``: until then the missing primary
    is what the message asks to fix.
    """
    if _primary(inv) is None:
        return []
    return [
        (
            ("nodes", i, "fabric", field),
            f"{node.name} sets fabric.{field} but its fabric is {node.fabric.kind}; NCCL applies "
            "it to RoCE only, so remove it or set kind: roce",
        )
        for i, node in enumerate(inv.nodes)
        for field in ("gid_index", "traffic_class")
        if getattr(node.fabric, field) is not None and node.fabric.kind != "roce"
    ]


# Fabric settings mpirun passes to every rank as one value (-mca ..._if_include, -x NCCL_*): a node
# whose value differs from the primary's would be told the primary's and fail or use the wrong device.
_SAME_ON_EVERY_NODE = {
    "interface": "rename the interface on that node (a udev rule or systemd .link file) or use a name every "
    "node has",
    "hca": "give every node the same HCA list (NCCL pairs HCAs by name and position across nodes)",
    "gid_index": "use one GID index on every node (show_gids lists them)",
    "traffic_class": "use one traffic class on every node",
}


def fabric_same_as_primary(inv: Inventory) -> list[Problem]:
    """Every node's fabric interface, HCAs and RoCE settings are the primary's (``_SAME_ON_EVERY_NODE``)."""
    reference = _primary(inv)
    if reference is None:
        return []
    problems: list[Problem] = []
    for field, fix in _SAME_ON_EVERY_NODE.items():
        want = getattr(reference.fabric, field)
        for i, node in enumerate(inv.nodes):
            got = getattr(node.fabric, field)
            if got != want:
                problems.append(
                    (
                        ("nodes", i, "fabric", field),
                        f"{node.name} has fabric.{field} {got!r} but the primary {reference.name} has "
                        f"{want!r}; mpirun gives every rank one value, so {fix}",
                    )
                )
    return problems


# --------------------------------------------------------------------------- the rest


def one_mofed_source(inv: Inventory) -> list[Problem]:
    """MLNX OFED comes from a URL or from a tarball on the controller, not both."""
    if inv.provision.mofed_url and inv.provision.mofed_tarball_path:
        return [
            (
                ("provision", "mofed_tarball_path"),
                "both provision.mofed_url and provision.mofed_tarball_path are set; keep one of them "
                "(mofed_url: the nodes download the tarball, mofed_tarball_path: clusterctl pushes it from this machine)",
            )
        ]
    return []


def registry_node_exists(inv: Inventory) -> list[Problem]:
    """``delivery.registry.node`` names a node of the inventory."""
    node = inv.delivery.registry.node
    names = dict.fromkeys(n.name for n in inv.nodes)
    if node is None or node in names:
        return []
    return [
        (
            ("delivery", "registry", "node"),
            f"{node!r} is not a node of this inventory (nodes: {', '.join(names)}); name "
            "the node that runs the registry, or use registry.address to run it on the controller",
        )
    ]


def unique_mount_targets(inv: Inventory) -> list[Problem]:
    """Every mount has its own container path."""
    return [
        (
            ("container", "mounts", j, "target"),
            f"two mounts share the target {target}; give each its own container path",
        )
        for j, target, _ in _repeats(enumerate(m.target for m in inv.container.mounts))
    ]


def _node_by_node(*rules: Rule) -> Rule:
    """One rule listing the problems of ``rules`` (each at a node, ``("nodes", i, ...)``) node by node,
    in the order of ``rules`` at each node."""

    def node_index(problem: Problem) -> int:
        index = problem[0][1]
        assert isinstance(index, int)
        return index

    def merged(inv: Inventory) -> list[Problem]:
        return sorted((problem for rule in rules for problem in rule(inv)), key=node_index)

    return merged


# The rules the model runs, in the order their problems are listed.
RULES: tuple[Rule, ...] = (
    _node_by_node(unique_node_names, unique_addresses, slots_within_gpus, rdma_has_fabric_address),
    one_primary,
    _node_by_node(one_fabric_subnet, unique_fabric_addresses),
    one_fabric_kind,
    roce_settings_on_roce_only,
    fabric_same_as_primary,
    one_mofed_source,
    registry_node_exists,
    unique_mount_targets,
)


def cross_field_problems(inv: Inventory) -> list[Problem]:
    """The problems of every rule in ``RULES``, as (location, message-with-fix) pairs. Empty when all hold."""
    return [problem for rule in RULES for problem in rule(inv)]
