"""The fabric counters as one collector: the command and its parser side by side. Pure.

Both backends read a node's counters through this collector: the ssh backend runs its argv on each node
over SSH (``clusterctl.diagnostics.counter_reading``), a Slurm job runs it inside the allocation with
``check topology``'s collectors (``clusterctl.run.slurm.snapshots``); either way its output is parsed by
the collector's own parser (``parse_counter_output``, by its kind).
"""

from __future__ import annotations

from clusterctl.diagnostics.collectors import Collector
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters, counter_command
from clusterctl.inventory import FabricSpec

COUNTERS_KEY = "fabric-counters"


def counters_collector(fabric: FabricSpec) -> Collector:
    """The collector of a node's fabric counters for ``fabric`` (its interface, HCAs and ports)."""
    # grep exits 2 when one of the counter files is missing: the output says which.
    return Collector(
        COUNTERS_KEY, ("sh", "-c", counter_command(fabric)), "fabric-counters", "any", frozenset({0, 1, 2})
    )


def node_counters(collector: Collector, text: str) -> NodeCounters:
    """The counters in ``text``, what ``collector`` printed on one node."""
    reading = collector.parse(text)
    assert isinstance(reading, NodeCounters), collector.kind
    return reading
