"""The pure half of pairwise isolation (`check pairs`, issue 27): which groups to measure and which node
the measurements condemn. The effectful half (running the collective on each group) is
``clusterctl.check.pairs``.

- ``halving_search`` finds one bad node in a large cluster the way ClusterKit does: measure halves,
  keep the half that is slower than the other, until two or three suspects are left (a pair is the
  smallest group a collective has, so the last step pairs each suspect with a node already cleared).
- ``judge_all_pairs`` gives every node its verdict from all pairs measured: a node's figure is the
  median of its pairs, compared with the baseline or, without one, with the median of its peers'
  figures; a slow pair of two nodes that are not slow is a slow link.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["ok", "slow", "fail"]
Pair = tuple[str, str]


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


# The fewest nodes the halving search takes: it compares two halves of at least two nodes each.
HALVING_MIN_NODES = 4


def halving_groups(nodes: int) -> int:
    """The most groups the halving search measures on ``nodes`` nodes: two halves a round while four
    suspects or more are left, then at most three pairs."""
    return 2 * math.ceil(math.log2(nodes)) + 3


@dataclass(frozen=True)
class Comparison:
    """Groups of (nearly) the same size measured one after the other: the slowest and the fastest with
    their figures (GB/s), whether the slowest is below ``(1 - tolerance)`` of the fastest, and what was
    compared: two halves, or the last suspects each paired with one cleared node."""

    slower: tuple[str, ...]
    slower_busbw: float
    faster: tuple[str, ...]
    faster_busbw: float
    split: bool
    suspects: bool = False

    @property
    def basis(self) -> str:
        """What a node's figure from this comparison is judged against, in a verdict line's words."""
        return "the other suspects' pairs" if self.suspects else "the other half"


@dataclass(frozen=True)
class Halving:
    """What the halving search found: the one slow node (None: the halves kept level, nothing named)
    and every comparison it made, in order."""

    bad: str | None
    comparisons: tuple[Comparison, ...]


def halving_search(
    nodes: Sequence[str], figure: Callable[[Sequence[str]], float], tolerance: float
) -> Halving:
    """The one slow node of ``nodes`` (at least ``HALVING_MIN_NODES``), found by comparing halves.

    ``figure(group)`` runs the collective on ``group`` and gives its bus bandwidth. Each round measures
    both halves of the suspects and keeps the slower one, if it is below ``(1 - tolerance)`` of the
    other; if neither is, no single node is slow and the search ends naming none. Once two or three
    suspects are left, each runs with one node the search cleared, and the slowest of those pairs names
    its suspect if it is below ``(1 - tolerance)`` of the fastest. Halves of one size are compared with
    each other, never with a pair's figure: where the bus bandwidth falls as groups grow (a blocking
    fabric, or the sandbox's nodes sharing the machine's cores: 16 of them ran at a sixth of a pair),
    a larger healthy group would otherwise look slow. Two groups per round: at most
    ``halving_groups(n)`` runs instead of n(n-1)/2. It assumes one slow node.

    Raises:
        ValueError: fewer than ``HALVING_MIN_NODES`` nodes.
    """
    if len(nodes) < HALVING_MIN_NODES:
        raise ValueError(f"the halving search compares halves of 2 nodes or more: {len(nodes)} is too few")
    comparisons: list[Comparison] = []

    def compare(groups: Sequence[Sequence[str]], *, suspects: bool = False) -> Comparison:
        figures = sorted(((figure(g), tuple(g)) for g in groups), key=lambda fg: fg[0])
        (slow_figure, slow), (fast_figure, fast) = figures[0], figures[-1]
        split = slow_figure < fast_figure * (1 - tolerance)
        comparisons.append(Comparison(slow, slow_figure, fast, fast_figure, split, suspects))
        return comparisons[-1]

    suspects: list[str] = list(nodes)
    cleared: list[str] = []
    while len(suspects) >= HALVING_MIN_NODES:
        half = len(suspects) // 2
        found = compare([suspects[:half], suspects[half:]])
        if not found.split:
            return Halving(None, tuple(comparisons))
        cleared += found.faster
        suspects = list(found.slower)
    last = compare([[suspect, cleared[0]] for suspect in suspects], suspects=True)
    return Halving(last.slower[0] if last.split else None, tuple(comparisons))


@dataclass(frozen=True)
class NodeVerdict:
    """One node's verdict: its figure (GB/s; 0 when its runs failed) against the reference it was judged
    by, and what that reference is."""

    node: str
    verdict: Verdict
    busbw: float
    reference: float
    basis: str

    def summary(self) -> str:
        """``busbw 0.8 GB/s vs 2.1 GB/s median of its peers``: the verdict line after the verdict."""
        return f"busbw {self.busbw:.3g} GB/s vs {self.reference:.3g} GB/s {self.basis}"


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
