"""Read every node's fabric counters over SSH: the effectful half of the proof by counters.

One SSH call per node, all in parallel (``clusterctl.hosts.ssh.run_on_nodes``), running the counters'
collector (``clusterctl.diagnostics.counter_probe``) for the node's fabric; its output is parsed by the
collector's parser. A node that cannot be reached or whose counters cannot be read gets a reading with
``error`` set.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.diagnostics.counter_probe import counters_collector, node_counters
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory, Node

# Reading a few sysfs files takes milliseconds; the bound is for a node that hangs.
READ_TIMEOUT_S = 20


def read_fabric_counters(inventory: Inventory, nodes: Sequence[Node]) -> dict[str, NodeCounters]:
    """Every node's fabric counters now, by node name (the node's own fabric settings)."""
    collectors = {node.name: counters_collector(node.fabric) for node in nodes}
    results = run_on_nodes(
        inventory, nodes, lambda node: list(collectors[node.name].argv), timeout_s=READ_TIMEOUT_S
    )
    readings = {}
    for node in nodes:
        result = results[node.name]
        reading = node_counters(collectors[node.name], result.stdout)
        if result.error:
            reading.error = f"{result.error}" + (f" ({reading.error})" if reading.error else "")
        readings[node.name] = reading
    return readings
