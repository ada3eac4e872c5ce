"""Verdict-first human output: one summary line (``128 nodes: 1 FAIL, 127 ok; ...``), then a verdict
line for each set of nodes that say the same, folded into Slurm's hostlist form
(``node2  FAIL  2 errors, 1 warning`` / ``node[001,003-128]  ok``; one line per node on request), then the
errors and warnings, each message wrapped under its code so it reads at 80 columns, the nodes that share
a finding folded the same way. ``info`` findings are counted in the summary and shown only on request."""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text

from clusterctl.findings import worst
from clusterctl.nodesets import fold, fold_lines, grouped
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from rich.console import Console

    from clusterctl.findings import Finding

CLUSTER = "(cluster)"  # the name a finding that concerns no one node is listed under
_WORD = {"error": "FAIL", "warning": "WARN", "info": "ok", None: "ok"}
_STYLE = {"FAIL": "bold red", "WARN": "yellow", "ok": "green"}
_ORDER = {"error": 0, "warning": 1, "info": 2}
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
# Messages are wrapped to the terminal, but never wider than this (long lines read badly).
MAX_WIDTH = 100
# A folded node set longer than this is not padded into the verdict column: its line starts with it,
# or, when that line would pass 80 columns, it gets lines of its own.
NAME_ROOM = 24


def counted(findings: Iterable[Finding], severities: tuple[str, ...] = ("error", "warning")) -> str:
    """``2 errors, 1 warning``: how many findings of each of ``severities`` (none: empty)."""
    counts: Counter[str] = Counter(f.severity for f in findings)
    parts = [
        f"{counts[s]} {s}{'' if counts[s] == 1 or s == 'info' else 's'}" for s in severities if counts[s]
    ]
    return ", ".join(parts)


def verdict_word(findings: Iterable[Finding]) -> str:
    """FAIL with an error, WARN with a warning, else ok."""
    return _WORD[worst(findings)]


def verdict_line(name: str, width: int, word: str, detail: str | Text = "", style: str | None = None) -> Text:
    """``node2  FAIL  2 errors, 1 warning``: the name padded to ``width``, the verdict word (padded to 4,
    styled by ``style`` or as FAIL/WARN/ok are), two spaces and ``detail`` (text made safe, or styled
    Text); nothing after the word when there is no detail."""
    line = Text(safe_text(name).ljust(width) + "  ")
    line.append(word if not detail else f"{word:<4}", style=style or _STYLE.get(word, ""))
    if detail:
        line.append("  ")
        line.append(detail if isinstance(detail, Text) else safe_text(detail))
    return line


def print_verdicts(console: Console, per_node: Mapping[str, list[Finding]], *, every: bool = False) -> None:
    """A line per set of nodes with the same verdict and counts, worst first (``every``: one line per
    node, in the order given); the cluster's own line last, only when it has a warning or an error."""
    said = {
        name: (word, counted(found) if word != "ok" else "")
        for name, found in per_node.items()
        if name != CLUSTER
        for word in [verdict_word(found)]
    }
    if any(f.severity != "info" for f in per_node.get(CLUSTER, [])):
        said[CLUSTER] = (verdict_word(per_node[CLUSTER]), counted(per_node[CLUSTER]))
    print_folded(console, said, every=every)


def print_folded(
    console: Console,
    said: Mapping[str, tuple[str, str | Text]],
    *,
    every: bool = False,
    order: Mapping[str, int] | None = None,
    styles: Mapping[str, str] | None = None,
    cut: bool = False,
) -> None:
    """Verdict lines of ``said`` (node -> (word, detail)): the nodes that say the same on one line, their
    names folded (``node[001-127]  ok``), the groups ranked by ``order`` of their word (default FAIL,
    WARN, ok), (cluster) after them; ``every``: one line per node in the order given. A set too long
    for the name column gets lines of its own, its verdict on the last. ``styles``: the words' styles
    (default as FAIL/WARN/ok are). ``cut``: a text detail longer than the line's room at 80 columns is
    cut with ``...`` (the command's table or ``--json`` has it whole)."""
    rank = order or {"FAIL": 0, "WARN": 1, "ok": 2}
    rows: list[tuple[list[str], str, str | Text]]
    if every:
        rows = [([name], word, detail) for name, (word, detail) in said.items()]
    else:
        nodes = {name: said[name] for name in said if name != CLUSTER}
        keys = {name: (word, str(detail)) for name, (word, detail) in nodes.items()}
        groups = grouped(keys, order=lambda key: rank.get(key[0], len(rank)))
        rows = [(names, word, nodes[names[0]][1]) for (word, _), names in groups]
        rows += [([CLUSTER], *said[CLUSTER])] if CLUSTER in said else []
    folded = [fold(names) for names, _, _ in rows]
    width = max((len(name) for name in folded if len(name) <= NAME_ROOM), default=0)
    for name, (names, word, detail) in zip(folded, rows, strict=True):
        style = (styles or {}).get(word)
        room = max(20, 80 - (width if len(name) <= NAME_ROOM else len(name)) - max(len(word), 4) - 4)
        if cut and isinstance(detail, str) and len(detail) > room:
            detail = detail[: room - 3] + "..."
        if len(name) <= NAME_ROOM:
            console.print(verdict_line(name, width, word, detail, style), highlight=False)
            continue
        if len(name) + max(len(word), 4) + len(detail) + 4 <= 80:
            console.print(verdict_line(name, len(name), word, detail, style), highlight=False)
            continue
        *lines, last = fold_lines(names, min(console.width, 80) - 1)
        for line in lines:
            console.print(Text(safe_text(line) + ","), highlight=False)
        console.print(verdict_line(last, len(last), word, detail, style), highlight=False)


def print_findings(console: Console, findings: Iterable[Finding], *, nodes: bool = True) -> None:
    """The findings worst first, grouped: ``error  node2  code`` on one line (without the node when
    ``nodes`` is false: one file's findings), then each message of that node's findings with this code
    (``- `` first when there are several) and their advice once, wrapped under it. Nodes whose findings
    of a code say the same share one group, their names folded (``warning  node[01-64]  code``; a set
    too long for the line follows it, ``    on node[...]``)."""
    width = max(40, min(console.width, MAX_WIDTH))
    per_node: dict[tuple[str, str, str, str], list[str]] = {}
    for f in sorted(findings, key=lambda f: _ORDER[f.severity]):
        per_node.setdefault((f.severity, f.node or CLUSTER, f.code, f.advice), []).append(f.message)
    shared: dict[tuple[str, str, str, tuple[str, ...]], list[str]] = {}
    for (severity, node, code, advice), messages in per_node.items():
        shared.setdefault((severity, code, advice, tuple(messages)), []).append(node)
    for (severity, code, advice, said), names in shared.items():
        folded = fold(names)
        head = Text()
        head.append(f"{severity:<7}", style=_SEVERITY_STYLE[severity])
        long = nodes and len(folded) + len(code) + 11 > width
        head.append(
            f"  {safe_text(folded)}  {safe_text(code)}" if nodes and not long else f"  {safe_text(code)}"
        )
        console.print(head, highlight=False)
        if long:
            for line in fold_lines(names, width - 8):
                console.print(Text("    on " + safe_text(line)), highlight=False)
        bullet = "- " if len(said) > 1 else ""
        for text in [bullet + m for m in said] + ([advice] if advice else []):
            indent = "    " + " " * len(bullet) if text.startswith(bullet) and bullet else "    "
            wrapped = textwrap.fill(safe_text(text), width=width, initial_indent="    ",
                                    subsequent_indent=indent, break_on_hyphens=False)  # fmt: skip
            console.print(wrapped, markup=False, highlight=False)


def print_summary(console: Console, text: str) -> None:
    """A summary line, wrapped at 80 columns (what follows the first line indented by two; a
    parenthesis is never cut)."""
    whole = re.sub(r"\([^)]*\)", lambda m: m.group().replace(" ", "\xa0"), safe_text(text))
    for line in textwrap.wrap(whole, width=80, subsequent_indent="  ", break_on_hyphens=False):
        console.print(line.replace("\xa0", " "), markup=False, highlight=False)


def summary_line(nodes: Mapping[str, list[Finding]]) -> str:
    """``2 nodes: 1 FAIL, 1 ok; 2 errors, 1 warning, 12 info (-v shows the info)``."""
    machines = {name: found for name, found in nodes.items() if name != CLUSTER}
    words = Counter(verdict_word(found) for found in machines.values())
    every = [f for found in nodes.values() for f in found]
    counts = counted(every, ("error", "warning", "info")) or "no findings"
    infos = sum(f.severity == "info" for f in every)
    more = " (-v shows the info)" if infos else ""
    return f"{verdict_counts(words, ('FAIL', 'WARN', 'ok'))}; {counts}{more}"


def verdict_counts(words: Counter[str], order: Iterable[str]) -> str:
    """``128 nodes: 1 FAIL, 127 ok``: how many nodes, then how many of them got each word (``order``)."""
    total = sum(words.values())
    verdicts = ", ".join(f"{words[w]} {w}" for w in order if words[w])
    return f"{total} node{'' if total == 1 else 's'}: {verdicts or 'none'}"
