"""What `clusterctl check topology` does: collect a bundle from every node (or read one saved
earlier) and judge it against the inventory. The one library call behind the command."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, read_bundle_of
from clusterctl.diagnostics.collect import collect_bundle
from clusterctl.diagnostics.rules_cluster import TopologyReport, judge_bundle
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory


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
    if saved:
        bundles = read_bundle_of(directory, inventory)
    else:
        bundles = collect_bundle(inventory, inventory.nodes, directory, timeout_s=timeout_s)
    return judge_bundle(bundles, inventory)


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
