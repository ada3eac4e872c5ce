"""Pairwise isolation, pure: all pairs for small clusters, halving for large ones; a simulated cluster
whose one node is slow is named, and only it, also where larger groups are slower than pairs."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest

from clusterctl.diagnostics.pairs import all_pairs, halving_search, judge_all_pairs, launch_order


@pytest.mark.parametrize("size", [2, 3, 4, 7, 8])
def test_all_pairs_come_in_rounds_that_spread_each_nodes_pairs(size: int) -> None:
    nodes = [f"n{i}" for i in range(size)]
    pairs = all_pairs(nodes)
    assert sorted(pairs) == sorted(itertools.combinations(nodes, 2))
    # In the first half of the runs, every node has already met some peers: none waits to the end.
    first_half = {node for pair in pairs[: max(1, len(pairs) // 2)] for node in pair}
    assert first_half == set(nodes) or size == 3
    assert all(nodes.index(a) < nodes.index(b) for a, b in pairs)


@pytest.mark.parametrize("size", range(2, 12))
def test_every_node_starts_as_many_pairs_as_it_joins(size: int) -> None:
    """In ``nodes`` order node 1 would start all of its pairs and the last node none (issue 41)."""
    nodes = [f"n{i}" for i in range(size)]
    runs = [launch_order(nodes, pair) for pair in all_pairs(nodes)]
    assert {frozenset(r) for r in runs} == {frozenset(p) for p in itertools.combinations(nodes, 2)}
    started = [sum(run[0] == node for run in runs) for node in nodes]
    assert max(started) - min(started) <= 1, started
    assert sum(started) * 2 == size * (size - 1)


def test_all_pairs_name_the_node_every_slow_pair_shares() -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    assert len(all_pairs(nodes)) == 6
    measured = {pair: 0.1 if "n3" in pair else 0.5 for pair in all_pairs(nodes)}
    verdicts, links = judge_all_pairs(measured, tolerance=0.5)
    assert [v.node for v in verdicts if v.verdict != "ok"] == ["n3"] and links == []
    verdicts, links = judge_all_pairs(dict.fromkeys(all_pairs(nodes), 0.5), tolerance=0.5)
    assert {v.verdict for v in verdicts} == {"ok"} and links == []


def _busbw(
    bad: str | None, runs: list[Sequence[str]], shrinking: bool = False
) -> Callable[[Sequence[str]], float]:
    """A group's bus bandwidth: 2 GB/s, 0.3 with ``bad`` in it; with ``shrinking``, divided by half the
    group's size (the sandbox's nodes share 2 cores: 16 of them ran at a sixth of a pair)."""

    def figure(group: Sequence[str]) -> float:
        assert len(group) >= 2
        runs.append(group)
        value = 0.3 if bad in group else 2.0
        return value / (len(group) / 2) if shrinking else value

    return figure


@pytest.mark.parametrize("shrinking", [False, True])
@pytest.mark.parametrize("bad", ["n01", "n07", "n13", "n16"])
def test_halving_search_names_the_bad_node_in_few_runs(bad: str, shrinking: bool) -> None:
    nodes = [f"n{i:02d}" for i in range(1, 17)]
    runs: list[Sequence[str]] = []
    found = halving_search(nodes, _busbw(bad, runs, shrinking), tolerance=0.5)
    assert found.bad == bad
    assert len(runs) <= 2 * 4 + 3  # ~2 log2(16), not the 120 pairs
    assert [len(c.slower) for c in found.comparisons] == [8, 4, 2, 2]  # halves of one size, then pairs
    assert found.comparisons[-1].suspects and found.comparisons[-1].slower[0] == bad
    healthy = halving_search([n for n in nodes if n != bad], _busbw(bad, runs, shrinking), tolerance=0.5)
    assert healthy.bad is None and len(healthy.comparisons) == 1  # the halves kept level: done


@pytest.mark.parametrize("size", [4, 5, 6, 7, 9])
def test_halving_search_on_odd_sizes_tests_every_node(size: int) -> None:
    nodes = [f"n{i}" for i in range(size)]
    for bad in nodes:
        assert halving_search(nodes, _busbw(bad, []), tolerance=0.5).bad == bad


def test_fewer_than_four_nodes_have_no_halves_to_compare() -> None:
    with pytest.raises(ValueError, match="too few"):
        halving_search(["a", "b", "c"], lambda group: 1.0, tolerance=0.5)


def _medians(nodes: Sequence[str], of: dict[str, float], link: tuple[str, str] | None = None) -> dict:
    """Every pair's median: the slower node's figure (``of``, default 2.0); ``link`` at 0.5."""
    return {p: 0.5 if p == link else min(of.get(p[0], 2.0), of.get(p[1], 2.0)) for p in all_pairs(nodes)}


def test_all_pairs_judge_names_the_slow_node_against_its_peers() -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    verdicts, links = judge_all_pairs(_medians(nodes, {"n3": 0.4}), tolerance=0.5)
    assert [(v.node, v.verdict) for v in verdicts] == [
        ("n1", "ok"),
        ("n2", "ok"),
        ("n3", "slow"),
        ("n4", "ok"),
    ]
    n3 = verdicts[2]
    assert (n3.busbw, n3.reference, n3.basis) == (0.4, 2.0, "median of its peers")
    assert links == []


def test_all_pairs_judge_a_failed_node_and_a_slow_link() -> None:
    nodes = ["a", "b", "c", "d", "e"]
    verdicts, links = judge_all_pairs(_medians(nodes, {"e": 0.0}, link=("a", "b")), tolerance=0.5)
    assert {v.node: v.verdict for v in verdicts} == {"a": "ok", "b": "ok", "c": "ok", "d": "ok", "e": "fail"}
    assert [(s.pair, s.busbw, s.reference) for s in links] == [(("a", "b"), 0.5, 2.0)]


def test_all_pairs_judge_against_a_baseline_condemns_every_node_below_it() -> None:
    nodes = ["n1", "n2", "n3"]
    verdicts, links = judge_all_pairs(_medians(nodes, {}), tolerance=0.15, baseline=10.0)
    assert {v.verdict for v in verdicts} == {"slow"} and {v.basis for v in verdicts} == {"the baseline"}
    assert links == []  # every pair's node is slow: the nodes are named, not the links
    healthy, _ = judge_all_pairs(_medians(nodes, {}), tolerance=0.15, baseline=2.2)
    assert {v.verdict for v in healthy} == {"ok"}
