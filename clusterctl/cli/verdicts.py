"""Verdict-first human output: one verdict line per node (``node2  FAIL  2 errors, 1 warning`` /
``node1  ok``), then the errors and warnings, each message wrapped under its code so it reads at 80
columns, then one summary line. ``info`` findings are counted in the summary and shown only on request."""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text

from clusterctl.findings import worst
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


def print_verdicts(console: Console, per_node: Mapping[str, list[Finding]]) -> None:
    """One line per node, its verdict then its counts; the cluster's own line only when it has a
    warning or an error."""
    shown = {
        name: found
        for name, found in per_node.items()
        if name != CLUSTER or any(f.severity != "info" for f in found)
    }
    width = max((len(name) for name in shown), default=0)
    for name, found in shown.items():
        word = verdict_word(found)
        console.print(
            verdict_line(name, width, word, counted(found) if word != "ok" else ""), highlight=False
        )


def print_findings(console: Console, findings: Iterable[Finding], *, nodes: bool = True) -> None:
    """The findings worst first, grouped: ``error  node2  code`` on one line (without the node when
    ``nodes`` is false: one file's findings), then each message of that node's findings with this code
    (``- `` first when there are several) and their advice once, wrapped under it."""
    width = max(40, min(console.width, MAX_WIDTH))
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for f in sorted(findings, key=lambda f: _ORDER[f.severity]):
        groups.setdefault((f.severity, f.node or CLUSTER, f.code, f.advice), []).append(f.message)
    for (severity, node, code, advice), messages in groups.items():
        head = Text()
        head.append(f"{severity:<7}", style=_SEVERITY_STYLE[severity])
        head.append(f"  {safe_text(node)}  {safe_text(code)}" if nodes else f"  {safe_text(code)}")
        console.print(head, highlight=False)
        bullet = "- " if len(messages) > 1 else ""
        for text in [bullet + m for m in messages] + ([advice] if advice else []):
            indent = "    " + " " * len(bullet) if text.startswith(bullet) and bullet else "    "
            wrapped = textwrap.fill(safe_text(text), width=width, initial_indent="    ",
                                    subsequent_indent=indent, break_on_hyphens=False)  # fmt: skip
            console.print(wrapped, markup=False, highlight=False)


def summary_line(nodes: Mapping[str, list[Finding]]) -> str:
    """``2 nodes: 1 FAIL, 1 ok; 2 errors, 1 warning, 12 info (-v shows the info)``."""
    machines = {name: found for name, found in nodes.items() if name != CLUSTER}
    words = Counter(verdict_word(found) for found in machines.values())
    verdicts = ", ".join(f"{words[w]} {w}" for w in ("FAIL", "WARN", "ok") if words[w])
    every = [f for found in nodes.values() for f in found]
    counts = counted(every, ("error", "warning", "info")) or "no findings"
    infos = sum(f.severity == "info" for f in every)
    more = " (-v shows the info)" if infos else ""
    plural = "" if len(machines) == 1 else "s"
    return f"{len(machines)} node{plural}: {verdicts or 'none'}; {counts}{more}"
