"""The pure half of pairwise isolation (`check pairs`, issue 27): which groups to measure and which node
the measurements condemn. The effectful half (running the collective on each group) is
``clusterctl.check.pairs``.

- ``judge`` turns repeated samples of one group into a verdict: the median of the repeats against a
  floor, so one noisy sample does not condemn a group.
- ``halving_search`` finds one bad node in a large cluster the way ClusterKit does: measure halves,
  keep the half that is slow, until one node is left (a pair is the smallest group a collective has,
  so the last step pairs each of the two suspects with a node already cleared).
- ``judge_all_pairs`` gives every node its verdict from all pairs measured: a node's figure is the
  median of its pairs, compared with the baseline or, without one, with the median of its peers'
  figures; a slow pair of two nodes that are not slow is a slow link.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["ok", "slow", "fail"]
Pair = tuple[str, str]


def judge(samples: Sequence[float], floor: float) -> bool:
    """Whether a group is healthy: the median of its repeated samples reaches ``floor``."""
    return bool(samples) and statistics.median(samples) >= floor


def all_pairs(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of ``nodes`` (n(n-1)/2 runs: for small clusters), in rounds of disjoint pairs.

    The rounds (the circle method of a round-robin tournament) spread each node's pairs over the whole
    measurement: measured one after the other, a node's pairs would all meet the same passing load of
    the machine and the node would be judged by it. Within a pair the nodes keep their order in ``nodes``.
    """
    slots: list[str | None] = [*nodes, None] if len(nodes) % 2 else list(nodes)
    order = {node: i for i, node in enumerate(nodes)}
    pairs = []
    for _ in range(len(slots) - 1):
        for a, b in zip(slots[: len(slots) // 2], reversed(slots[len(slots) // 2 :]), strict=True):
            if a is not None and b is not None:
                pairs.append((a, b) if order[a] < order[b] else (b, a))
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return pairs


def launch_order(nodes: Sequence[str], pair: Pair) -> Pair:
    """``pair`` as it is run, its first node starting mpirun, chosen so that over all pairs every node
    starts as many as it joins, give or take one: in ``nodes`` order the first node would start every
    one of its pairs (on 4 nodes node1 all three, node4 none), and a node that starts a run carries
    mpirun and its SSH sessions beside its rank, so its figure would be systematically lower.

    The rule of a balanced round robin: with an odd count m, node i starts its pair with j when j comes
    1 to m // 2 places after it (cyclically); with an even count, the last node takes turns by the
    other node's place.
    """
    i, j = sorted((nodes.index(pair[0]), nodes.index(pair[1])))
    m = len(nodes) if len(nodes) % 2 else len(nodes) - 1
    starts = (j - i) <= m // 2 if j < m else i % 2 == 1
    return (nodes[i], nodes[j]) if starts else (nodes[j], nodes[i])


def halving_search(nodes: Sequence[str], healthy: Callable[[Sequence[str]], bool]) -> str | None:
    """The one bad node of ``nodes`` found by measuring halves, or None when the whole group is healthy.

    It assumes one bad node (a slow group holds it, a healthy one does not).

    ``healthy(group)`` runs the collective on ``group`` (at least two nodes) and judges it: the whole
    group once, one half per halving (ceil(log2 n) at most), and one pair to tell the last two apart,
    so at most ceil(log2 n) + 2 runs instead of n(n-1)/2.
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


@dataclass(frozen=True)
class NodeVerdict:
    """One node's verdict: its figure (GB/s; 0 when its runs failed; None when it was only cleared as
    part of a healthy group) against the reference it was judged by, and what that reference is."""

    node: str
    verdict: Verdict
    busbw: float | None
    reference: float
    basis: str

    def summary(self) -> str:
        """``busbw 0.8 GB/s vs 2.1 GB/s median of its peers``: the verdict line after the verdict."""
        figure = "not measured alone" if self.busbw is None else f"busbw {self.busbw:.3g} GB/s"
        return f"{figure} vs {self.reference:.3g} GB/s {self.basis}"


@dataclass(frozen=True)
class SlowLink:
    """A pair below the floor whose two nodes are not slow: the link (cable, port, switch) between them."""

    pair: Pair
    busbw: float
    reference: float

    def summary(self) -> str:
        """``node1 - node2: busbw 0.5 GB/s vs 2 GB/s``."""
        return f"{' - '.join(self.pair)}: busbw {self.busbw:.3g} GB/s vs {self.reference:.3g} GB/s"


def judge_all_pairs(
    medians: dict[Pair, float], tolerance: float, baseline: float | None = None
) -> tuple[list[NodeVerdict], list[SlowLink]]:
    """Every node's verdict, and the slow links, from the median bus bandwidth of every pair.

    A node's figure is the median of its pairs, so its one bad link does not condemn it. It is slow
    below ``reference x (1 - tolerance)``, the reference being ``baseline`` or, without one, the median
    of the other nodes' figures (one slow node moves that median little: each of its peers has only
    one pair with it). A figure of 0 (its runs failed) is ``fail``. A pair below the floor whose
    nodes are both healthy is a slow link, judged against the baseline or the median of the pairs
    of healthy nodes.
    """
    nodes = sorted({node for pair in medians for node in pair})
    figure = {n: statistics.median(v for pair, v in medians.items() if n in pair) for n in nodes}
    verdicts = []
    for node in nodes:
        peers = [figure[n] for n in nodes if n != node]
        reference = baseline if baseline is not None else statistics.median(peers)
        basis = "the baseline" if baseline is not None else "median of its peers"
        verdict: Verdict = "ok" if figure[node] >= reference * (1 - tolerance) else "slow"
        if figure[node] == 0:
            verdict = "fail"
        verdicts.append(NodeVerdict(node, verdict, figure[node], reference, basis))
    bad = {v.node for v in verdicts if v.verdict != "ok"}
    healthy = [v for pair, v in medians.items() if not bad & set(pair)]
    if baseline is None and not healthy:
        return verdicts, []
    reference = baseline if baseline is not None else statistics.median(healthy)
    links = [
        SlowLink(pair, v, reference)
        for pair, v in medians.items()
        if not bad & set(pair) and v < reference * (1 - tolerance)
    ]
    return verdicts, links
