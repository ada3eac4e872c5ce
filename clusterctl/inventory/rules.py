"""The inventory's cross-field rules: what no single field can check (unique names, one primary, one subnet).

The ``Inventory`` model runs them after every field validated; a broken rule raises
``InventoryRuleError`` with the location of each problem, which loading turns into file, line and field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterctl.inventory.models import Inventory

Loc = tuple[str | int, ...]


class InventoryRuleError(Exception):
    """Raised from validation for rules that span fields; carries (location, message) pairs.

    Not a ValueError on purpose: pydantic passes it through untouched, keeping the locations.
    """

    def __init__(self, problems: list[tuple[Loc, str]]):
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


def cross_field_problems(inv: Inventory) -> list[tuple[Loc, str]]:
    """Every rule that spans fields, as (location, message-with-fix) pairs. Empty when all hold."""
    problems: list[tuple[Loc, str]] = []
    seen_names: dict[str, int] = {}
    seen_addresses: dict[str, int] = {}
    for i, node in enumerate(inv.nodes):
        if node.name in seen_names:
            problems.append(
                (
                    (("nodes", i, "name")),
                    f"duplicate node name {node.name!r} (also nodes[{seen_names[node.name]}]); give every node a unique name",
                )
            )
        seen_names.setdefault(node.name, i)
        address = node.address.lower()  # DNS names are case-insensitive: GPU01 and gpu01 are one host
        if address in seen_addresses:
            problems.append(
                (
                    ("nodes", i, "address"),
                    f"duplicate address {node.address!r} (also nodes[{seen_addresses[address]}], names compared "
                    "ignoring case); every node needs its own management address",
                )
            )
        seen_addresses.setdefault(address, i)
        if node.gpus.count and node.slots and node.slots > node.gpus.count:
            problems.append(
                (
                    ("nodes", i, "slots"),
                    f"slots {node.slots} > {node.gpus.count} GPUs on {node.name}; set slots to at most the GPU count (one rank per GPU)",
                )
            )
        if node.rdma and node.fabric.address is None:
            problems.append(
                (
                    ("nodes", i, "fabric", "address"),
                    f"{node.name} has a {node.fabric.kind} fabric but no fabric address; add e.g. address: 192.168.11.{i + 1}/24",
                )
            )

    primaries = [i for i, n in enumerate(inv.nodes) if n.role == "primary"]
    if not primaries:
        problems.append(
            (
                ("nodes",),
                "no node has role: primary; mark exactly one node (the one that runs mpirun) with role: primary",
            )
        )
    for i in primaries[1:]:
        problems.append(
            (
                ("nodes", i, "role"),
                f"a second primary ({inv.nodes[primaries[0]].name} is already primary); set role: secondary on all nodes but one",
            )
        )

    fabric_nodes = [(i, n) for i, n in enumerate(inv.nodes) if n.fabric.address is not None]
    if fabric_nodes:
        first = fabric_nodes[0][1]
        network = first.fabric.address.network  # type: ignore[union-attr]
        seen_ips: dict[str, int] = {}
        for i, node in fabric_nodes:
            addr = node.fabric.address
            assert addr is not None
            if addr.network != network:
                problems.append(
                    (
                        ("nodes", i, "fabric", "address"),
                        f"{addr} is not in the subnet {network} of {first.name}; put every fabric address in one subnet",
                    )
                )
            ip = str(addr.ip)
            if ip in seen_ips:
                problems.append(
                    (
                        ("nodes", i, "fabric", "address"),
                        f"duplicate fabric address {ip} (also nodes[{seen_ips[ip]}]); give every node its own",
                    )
                )
            seen_ips.setdefault(ip, i)
    kinds = {n.fabric.kind for n in inv.nodes}
    if len(kinds) > 1:
        problems.append(
            (("nodes",), f"nodes mix fabric kinds {sorted(kinds)}; use one fabric kind for the whole cluster")
        )
    problems += _per_rank_fabric_problems(inv)
    if inv.provision.mofed_url and inv.provision.mofed_tarball_path:
        problems.append(
            (
                ("provision", "mofed_tarball_path"),
                "both provision.mofed_url and provision.mofed_tarball_path are set; keep one of them "
                "(mofed_url: the nodes download the tarball, mofed_tarball_path: clusterctl pushes it from this machine)",
            )
        )
    registry_node = inv.delivery.registry.node
    if registry_node is not None and registry_node not in seen_names:
        problems.append(
            (
                ("delivery", "registry", "node"),
                f"{registry_node!r} is not a node of this inventory (nodes: {', '.join(seen_names)}); name "
                "the node that runs the registry, or use registry.address to run it on the controller",
            )
        )
    seen_targets: set[str] = set()
    for j, mount in enumerate(inv.container.mounts):
        target = mount.target
        if target in seen_targets:
            problems.append(
                (
                    ("container", "mounts", j, "target"),
                    f"two mounts share the target {target}; give each its own container path",
                )
            )
        seen_targets.add(target)
    return problems


# Fabric settings mpirun passes to every rank as one value (-mca ..._if_include, -x NCCL_*): a node
# whose value differs from the primary's would be told the primary's and fail or use the wrong device.
_SAME_ON_EVERY_NODE = {
    "interface": "rename the interface on that node (a udev rule or systemd .link file) or use a name every "
    "node has",
    "hca": "give every node the same HCA list (NCCL pairs HCAs by name and position across nodes)",
    "gid_index": "use one GID index on every node (show_gids lists them)",
    "traffic_class": "use one traffic class on every node",
}


def _per_rank_fabric_problems(inv: Inventory) -> list[tuple[Loc, str]]:
    """RoCE settings on a node that is not RoCE; nodes whose fabric interface, HCAs or RoCE settings
    differ from the primary's."""
    primaries = [n for n in inv.nodes if n.role == "primary"]
    if not primaries:
        return []
    reference = primaries[0]
    problems: list[tuple[Loc, str]] = []
    for i, node in enumerate(inv.nodes):
        for field in ("gid_index", "traffic_class"):
            if getattr(node.fabric, field) is not None and node.fabric.kind != "roce":
                problems.append(
                    (
                        ("nodes", i, "fabric", field),
                        f"{node.name} sets fabric.{field} but its fabric is {node.fabric.kind}; NCCL applies "
                        "it to RoCE only, so remove it or set kind: roce",
                    )
                )
    for field, fix in _SAME_ON_EVERY_NODE.items():
        want = getattr(reference.fabric, field)
        for i, node in enumerate(inv.nodes):
            got = getattr(node.fabric, field)
            if got != want:
                problems.append(
                    (
                        ("nodes", i, "fabric", field),
                        f"{node.name} has fabric.{field} {got!r} but the primary {reference.name} has {want!r}; "
                        f"mpirun gives every rank one value, so {fix}",
                    )
                )
    return problems
