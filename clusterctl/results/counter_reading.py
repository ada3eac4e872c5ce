"""Read every node's fabric counters over SSH: the effectful half of the proof by counters.

One SSH call per node, all in parallel (``clusterctl.hosts.ssh.run_on_nodes``), running
``counter_command`` for the node's fabric; the output is parsed by ``parse_counter_output``. A node
that cannot be reached or whose counters cannot be read gets a reading with ``error`` set.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters, counter_command, parse_counter_output
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory, Node

# Reading a few sysfs files takes milliseconds; the bound is for a node that hangs.
READ_TIMEOUT_S = 20


def read_fabric_counters(inventory: Inventory, nodes: Sequence[Node]) -> dict[str, NodeCounters]:
    """Every node's fabric counters now, by node name (the node's own fabric settings)."""
    results = run_on_nodes(
        inventory, nodes, lambda node: ["sh", "-c", counter_command(node.fabric)], timeout_s=READ_TIMEOUT_S
    )
    readings = {}
    for node in nodes:
        result = results[node.name]
        reading = parse_counter_output(result.stdout)
        if result.error:
            reading.error = f"{result.error}" + (f" ({reading.error})" if reading.error else "")
        readings[node.name] = reading
    return readings
