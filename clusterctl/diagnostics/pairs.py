"""The pure half of pairwise isolation (`check pairs`, issue 27): which groups to measure and which node
the measurements condemn. The effectful half (running the collective on each group) is not built yet.

- ``judge`` turns repeated samples of one group into a verdict: the median of the repeats against a
  floor, so one noisy sample does not condemn a group.
- ``slow_nodes`` names the nodes every slow pair shares when all pairs were measured (a small cluster).
- ``halving_search`` finds one bad node in a large cluster the way ClusterKit does: measure halves,
  keep the half that is slow, until one node is left (a pair is the smallest group a collective has,
  so the last step pairs each of the two suspects with a node already cleared).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from itertools import combinations


def judge(samples: Sequence[float], floor: float) -> bool:
    """Whether a group is healthy: the median of its repeated samples reaches ``floor``."""
    return bool(samples) and statistics.median(samples) >= floor


def all_pairs(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ``nodes`` (n(n-1)/2 runs: for small clusters)."""
    return list(combinations(nodes, 2))


def slow_nodes(healthy: dict[tuple[str, str], bool]) -> list[str]:
    """The nodes in every slow pair (all pairs measured); nodes of a healthy pair are cleared."""
    slow = [set(pair) for pair, ok in healthy.items() if not ok]
    if not slow:
        return []
    cleared = {node for pair, ok in healthy.items() if ok for node in pair}
    return sorted(set.intersection(*slow) - cleared)


def halving_search(nodes: Sequence[str], healthy: Callable[[Sequence[str]], bool]) -> str | None:
    """The one bad node of ``nodes`` found by measuring halves, or None when the whole group is healthy.

    It assumes one bad node (a slow group holds it, a healthy one does not).

    ``healthy(group)`` runs the collective on ``group`` (at least two nodes) and judges it. About
    2 log2(n) runs instead of n(n-1)/2.
    """
    if healthy(nodes):
        return None
    suspects: list[str] = list(nodes)
    cleared: list[str] = []
    while len(suspects) > 2:
        half, rest = suspects[: len(suspects) // 2], suspects[len(suspects) // 2 :]
        probe, other = (half, rest) if len(half) >= 2 else (rest, half)  # a collective needs two nodes
        if healthy(probe):
            cleared, suspects = cleared + probe, other
        else:
            cleared, suspects = cleared + other, probe
    if len(suspects) == 1:
        return suspects[0]
    if not cleared:  # a two-node cluster: one pair cannot tell which of the two is slow
        return None
    first, second = suspects
    return second if healthy([first, cleared[0]]) else first
