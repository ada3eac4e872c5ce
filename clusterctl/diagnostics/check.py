"""What `clusterctl check topology` does: collect a bundle from every node (or read one saved
earlier) and judge it against the inventory. The one library call behind the command."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, read_bundle_of
from clusterctl.diagnostics.collect import bundle_of_every_node
from clusterctl.diagnostics.rules_cluster import TopologyReport, judge_bundle
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory, Node

# `check topology --json`'s document: bump the version when a key changes meaning or goes away.
SCHEMA = "clusterctl.check-topology/1"


def check_topology(
    inventory: Inventory, directory: Path, *, saved: bool = False, timeout_s: float = 180
) -> TopologyReport:
    """Collect every node's facts into the bundle ``directory``, then judge them.

    With ``saved``, ``directory`` holds a bundle collected earlier (``check topology``, ``collect -o``
    or a run's ``topology/``): it is read and judged, and no host is contacted.

    Raises:
        InputError: a saved bundle that cannot be read or was collected with another inventory, or a
            directory that cannot be written.
    """
    return judge_bundle(
        bundle_of_every_node(inventory, directory, saved=saved, timeout_s=timeout_s), inventory
    )


def snapshot_findings(inventory: Inventory, directory: Path) -> list[Finding]:
    """The findings of a run's topology snapshot, for the nodes it holds (the run's nodes).

    A snapshot that cannot be read gives one warning saying so: the run is still judged by its log.
    """
    try:
        bundles = read_bundle_of(directory, inventory)
    except InputError as error:
        return [Finding(severity="warning", code="snapshot-unreadable", message=str(error))]
    return bundle_findings(inventory, bundles)


def bundle_findings(inventory: Inventory, bundles: Mapping[str, NodeBundle]) -> list[Finding]:
    """The findings of a snapshot already read (a Slurm job's, say), for the nodes it holds."""
    report = judge_bundle(bundles, inventory)
    return [f for name in bundles if name in report.nodes for f in report.nodes[name].findings]


def chosen_nic_findings(
    inventory: Inventory,
    bundles: Mapping[str, NodeBundle],
    gpu_nics: Mapping[str, Mapping[int, list[str]]],
    gpu_gdr: Mapping[str, Mapping[int, bool]],
) -> list[Finding]:
    """The run's GDR and rail findings per GPU, against the NIC NCCL's log says each GPU used.

    ``gpu_nics``/``gpu_gdr`` are by the host names of the log's line prefixes; a host is matched to a
    node of the snapshot by name, address or its first label (a container with the host network
    prints the host's hostname). Hosts that match no node, and nodes without a topology matrix, are
    not judged.
    """
    from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
    from clusterctl.diagnostics.rules import chosen_nic_rules, expectation_for

    findings = []
    for host, used in gpu_nics.items():
        node = _node_of_host(inventory, bundles, host)
        text = bundles[node.name].outputs.get("nvidia-smi-topo") if node else None
        if node is None or not text:
            continue
        topo = parse_nvidia_smi_topo(text)
        findings += chosen_nic_rules(topo, used, gpu_gdr.get(host, {}), expectation_for(inventory, node))
    return findings


def _node_of_host(inventory: Inventory, bundles: Mapping[str, NodeBundle], host: str) -> Node | None:
    for node in inventory.nodes:
        if node.name in bundles and host.split(".")[0] in (node.name, node.name.split(".")[0], node.address):
            return node
    return None


def snapshot_bundles(inventory: Inventory, directory: Path) -> dict[str, NodeBundle]:
    """The snapshot bundle in ``directory``; empty when it cannot be read (``snapshot_findings`` says so)."""
    try:
        return read_bundle_of(directory, inventory)
    except InputError:
        return {}
