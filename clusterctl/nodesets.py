"""Node names folded into Slurm's hostlist form, ``node[001-096,101-128]``, as ``clush -b`` and
``scontrol show hostnames``' inverse print them, and per-node results grouped by what they say, so an
output at 128 nodes is a few lines: the nodes that say the same thing share one.

The folding is ClusterShell's ``NodeSet`` (the library behind ``clush`` and ``nodeset -f``), with group
resolution off: a name is only ever a name, never ``@group`` looked up in /etc/clustershell. Names that
are not plain hostnames (``(cluster)``, anything with a bracket or a comma) are never handed to it; they
are listed as they are, after the folded ones."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

K = TypeVar("K")
_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _split(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(plain hostnames, other names), each in the order given, without repeats."""
    plain: list[str] = []
    other: list[str] = []
    for name in dict.fromkeys(names):
        (plain if _HOSTNAME.fullmatch(name) else other).append(name)
    return plain, other


def fold(names: Iterable[str]) -> str:
    """``node[001-096,101-128]``: the names folded (sorted as ClusterShell sorts them; names without
    numbers listed by name, ``gpu-a,login,node[1-4]``); empty for no names."""
    plain, other = _split(names)
    folded = str(NodeSet.fromlist(plain, resolver=RESOLVER_NOGROUP)) if plain else ""
    return ",".join(([folded] if folded else []) + other)


def fold_lines(names: Iterable[str], width: int) -> list[str]:
    """The folded names cut into lines of at most ``width`` characters where they can be (one run of
    consecutive names is never cut; each line is a hostlist of its own, ``node[001,003,...,061]`` then
    ``node[063,...]``), so a scattered set reads at 80 columns."""
    whole = fold(names)
    if len(whole) <= width:
        return [whole] if whole else []
    plain, other = _split(names)
    lines: list[str] = []
    current = NodeSet(resolver=RESOLVER_NOGROUP)
    for run in NodeSet.fromlist(plain, resolver=RESOLVER_NOGROUP).contiguous():
        grown = current | run
        if current and len(str(grown)) > width:
            lines.append(str(current))
            current = run
        else:
            current = grown
    if current:
        lines.append(str(current))
    for name in other:
        if lines and len(lines[-1]) + 1 + len(name) <= width:
            lines[-1] += "," + name
        else:
            lines.append(name)
    return lines


def grouped(results: Mapping[str, K], order: Callable[[K], int] | None = None) -> list[tuple[K, list[str]]]:
    """The nodes of ``results`` (node -> what it says) grouped by what they say: ``[(said, [names])]``,
    groups in the order ``order`` gives (stable: first seen first), names in the order given."""
    groups: dict[K, list[str]] = {}
    for name, said in results.items():
        groups.setdefault(said, []).append(name)
    items = list(groups.items())
    return sorted(items, key=lambda item: order(item[0])) if order is not None else items
