"""Cross-node rules and the whole judgement of a topology bundle. Pure.

``judge_bundle`` runs the per-node rules (rules_node) on every inventory node and then compares the
nodes: OFED, NVIDIA driver and HCA firmware versions that differ between nodes or from the inventory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clusterctl.diagnostics.bundle import NodeBundle
from clusterctl.diagnostics.parsers.ibstat import IbStat
from clusterctl.diagnostics.parsers.ibv_devinfo import IbvDevinfo
from clusterctl.diagnostics.parsers.nvidia_smi_csv import NvidiaSmiCsv
from clusterctl.diagnostics.parsers.ofed_info import OfedInfo
from clusterctl.diagnostics.rules import version_rules
from clusterctl.diagnostics.rules_node import NodeReport, judge_node
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory, Node


@dataclass
class TopologyReport:
    """Every node's report by name, and the findings that concern the cluster as a whole."""

    nodes: dict[str, NodeReport]
    cluster: list[Finding]

    @property
    def findings(self) -> list[Finding]:
        """Every finding, per node and cluster-wide."""
        return [f for report in self.nodes.values() for f in report.findings] + self.cluster


def _named(node: Node, device: str) -> bool:
    """Whether ``device`` is one of the node's inventory HCAs (any device when it names none)."""
    return not node.fabric.hca or device in {h.split(":")[0] for h in node.fabric.hca}


def node_versions(node: Node, report: NodeReport) -> dict[str, str | None]:
    """The versions a node reported: ofed, nvidia-driver and hca-firmware (of the inventory's HCA)."""
    ofed, csv = report.facts.get("ofed-info"), report.facts.get("nvidia-smi-csv")
    ibstat, devinfo = report.facts.get("ibstat"), report.facts.get("ibv-devinfo")
    firmware = None
    if isinstance(ibstat, IbStat):
        cas = [ca for ca in ibstat.cas if _named(node, ca.name)]
        firmware = cas[0].firmware if cas else None
    if firmware is None and isinstance(devinfo, IbvDevinfo):
        devices = [d for d in devinfo.devices if _named(node, d.name)]
        firmware = devices[0].fw_ver if devices else None
    drivers = (
        sorted({row["driver_version"] for row in csv.rows if row.get("driver_version")})
        if isinstance(csv, NvidiaSmiCsv)
        else []
    )
    return {
        "ofed": ofed.version if isinstance(ofed, OfedInfo) else None,
        "nvidia-driver": ",".join(drivers) or None,
        "hca-firmware": firmware,
    }


def cluster_rules(inventory: Inventory, reports: Mapping[str, NodeReport]) -> list[Finding]:
    """Versions that differ between nodes, and an OFED that is not the image's (inventory) MOFED."""
    versions = {node.name: node_versions(node, reports[node.name]) for node in inventory.nodes}
    expected = {"ofed": inventory.image.versions.mofed}
    return [
        finding
        for label in ("ofed", "nvidia-driver", "hca-firmware")
        for finding in version_rules(label, {n: v[label] for n, v in versions.items()}, expected.get(label))
    ]


def judge_bundle(bundles: Mapping[str, NodeBundle], inventory: Inventory) -> TopologyReport:
    """Judge a bundle (just collected, or read with ``read_bundle_of``) against the inventory's nodes."""
    reports = {node.name: judge_node(inventory, node, bundles.get(node.name)) for node in inventory.nodes}
    return TopologyReport(nodes=reports, cluster=cluster_rules(inventory, reports))
