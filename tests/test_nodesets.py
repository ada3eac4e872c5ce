"""Node names folded into Slurm's hostlist form, and per-node results grouped by what they say."""

from __future__ import annotations

import pytest
from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

from clusterctl.nodesets import fold, fold_lines, grouped


def _expand(text: str) -> set[str]:
    return set(NodeSet(text, resolver=RESOLVER_NOGROUP))


def test_128_padded_names_with_a_gap_fold_as_scontrol_prints_them() -> None:
    names = [f"node{i:03d}" for i in [*range(1, 97), *range(101, 129)]]
    assert fold(names) == "node[001-096,101-128]"


@pytest.mark.parametrize("count", [128, 256])
def test_every_name_comes_back_from_the_fold(count: int) -> None:
    names = [f"gpu{i}" for i in range(1, count + 1) if i % 7]
    assert _expand(fold(names)) == set(names)
    assert fold(reversed(names)) == fold(names)  # the order given does not matter


def test_names_without_numbers_and_odd_names_are_kept_whole() -> None:
    names = ["login", "gpu-a", "node2", "node1", "rack1-node2", "rack2-node2", "(cluster)", "node1"]
    assert fold(names) == "gpu-a,login,node[1-2],rack[1-2]-node2,(cluster)"
    assert fold(["@admin"]) == "@admin"  # never looked up as a ClusterShell group
    assert fold([]) == ""


@pytest.mark.parametrize("count", [128, 256])
def test_a_scattered_set_is_cut_into_hostlists_that_fit(count: int) -> None:
    names = [f"node{i:03d}" for i in range(1, count + 1, 2)]  # every other node: nothing to fold
    lines = fold_lines(names, 76)
    assert len(lines) > 1 and all(len(line) <= 76 for line in lines)
    assert set().union(*(_expand(line) for line in lines)) == set(names)
    assert fold_lines(names[:3], 76) == ["node[001,003,005]"]
    assert fold_lines([*names[:2], "login", "(cluster)"], 76) == ["login,node[001,003],(cluster)"]


def test_results_group_by_what_they_say_worst_first() -> None:
    said = {f"n{i:03d}": "ok" for i in range(1, 257)} | {"n017": "FAIL", "n200": "WARN", "n201": "FAIL"}
    rank = {"FAIL": 0, "WARN": 1, "ok": 2}
    groups = grouped(said, order=rank.__getitem__)
    assert [(word, fold(names)) for word, names in groups] == [
        ("FAIL", "n[017,201]"),
        ("WARN", "n200"),
        ("ok", "n[001-016,018-199,202-256]"),
    ]
