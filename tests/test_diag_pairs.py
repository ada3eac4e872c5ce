"""Pairwise isolation, pure: medians against a floor, all pairs for small clusters, halving for large
ones; a simulated cluster whose one node is slow is named, and only it."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import pytest

from clusterctl.diagnostics.pairs import all_pairs, halving_search, judge, judge_all_pairs, launch_order


def test_one_noisy_sample_does_not_condemn_a_group() -> None:
    assert judge([10.0, 2.0, 10.5], floor=9.0)  # median 10
    assert not judge([2.0, 10.0, 3.0], floor=9.0)
    assert not judge([], floor=9.0)  # no sample: not healthy


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


@pytest.mark.parametrize("bad", ["n01", "n07", "n13", "n16"])
def test_halving_search_names_the_bad_node_in_few_runs(bad: str) -> None:
    nodes = [f"n{i:02d}" for i in range(1, 17)]
    runs: list[Sequence[str]] = []

    def healthy(group: Sequence[str]) -> bool:
        assert len(group) >= 2
        runs.append(group)
        return bad not in group

    assert halving_search(nodes, healthy) == bad
    assert len(runs) <= 2 * 4 + 2  # ~2 log2(16), not the 120 pairs
    assert halving_search([n for n in nodes if n != bad], healthy) is None


@pytest.mark.parametrize("size", [3, 5, 6])
def test_halving_search_on_odd_sizes_tests_every_node(size: int) -> None:
    nodes = [f"n{i}" for i in range(size)]
    for bad in nodes:
        assert halving_search(nodes, functools.partial(_without, bad)) == bad


def _without(bad: str, group: Sequence[str]) -> bool:
    return bad not in group


def test_two_nodes_cannot_be_told_apart() -> None:
    assert halving_search(["a", "b"], lambda group: False) is None


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
