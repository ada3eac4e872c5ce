"""The report as one self-contained HTML page, for sharing a cluster's acceptance result. Verdict first:
per configuration, why it ran as fast as it did (explain's verdict and its one-line cause, the phases
per node as an inline SVG chart, the rules' findings with their advice and evidence, the POP,
computation-scalability and MFU lines); then the report table (its key columns, chosen as the terminal
chooses them, fit a 1280-pixel window; every column behind a toggle) and what each multi-device row
means, one figure per configuration embedded as a base64 PNG, and every run with its verdict, its
findings and a link to its run directory. Nothing is loaded from elsewhere (no script, no stylesheet, no
font): the page reads the same from a mail attachment as from the machine that made it.

The explanations are handed in (``Explained``), not made here: ``results`` sits below ``explain`` in the
layers (tests/test_layering.py), so the caller, which may import both, runs explain's functions.

A run's link is made from the name of the directory its record was read from (percent-encoded, always
relative), never from what the record says: a crafted ``run_id`` cannot become a ``javascript:`` link,
and a renamed run directory still links right. The page carries a generator mark; ``write_html``
replaces only a page that carries it, never writes through a symbolic link, and switches the new page
in with one rename."""

from __future__ import annotations

import base64
import errno
import math
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from clusterctl.errors import InputError
from clusterctl.templating import html_environment

if TYPE_CHECKING:
    from clusterctl.results.history import History
    from clusterctl.results.record import RunRecord
    from clusterctl.results.report import ReportRow

TEMPLATE = "report.html.j2"
PAGE = "index.html"
# The page's <meta name="generator">: what marks a page this command wrote, and may replace.
GENERATOR = "clusterctl report --html"
_MARK = f'<meta name="generator" content="{GENERATOR}">'.encode()
# The page's start as clusterctl wrote it before the mark existed: replaced as its own too, so an
# upgrade does not refuse the page the last `report --html` wrote (scripts/quickstart.sh rewrites one).
_BEFORE_THE_MARK = (
    b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    b'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>clusterctl report: '
)
# The mark sits in the page's first lines; this much of an existing page is read to find it.
_HEAD_BYTES = 4096
# The width, in terminal columns, the report table's key columns are chosen for (report_table's own
# choice, by rank). A column of the terminal's table drew 8.8 pixels of the page's (measured in
# chromium on the scaling fixture: 130 columns, 1,145 px), so 110 give about 970 px, room to spare in
# the page's 1,152-pixel column; a key cell wraps rather than overflow it (the template's CSS), and
# tests/test_report_html.py measures the page in a 1280-pixel window.
KEY_WIDTH = 110
# The phases chart (inline SVG, in CSS pixels): the host names' column, the bars, the step's label.
_LABEL_W, _BARS_W, _STEP_W = 110, 520, 90
_ROW_H, _BAR_H, _LEGEND_H = 26, 18, 24
_CHAR_W = 7.5  # a generous mean width of a 12-pixel sans-serif character: the legend's labels never touch
# One colour per phase in the order the explanation lists them (matplotlib's tab10, as explain --plot
# draws them); the step's time no phase accounts for in grey.
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_OTHER, _OTHER_COLOUR = "other", "#bbbbbb"


class NodeSteps(Protocol):
    """One node's mean step, phase by phase (explain's ``NodePhases``): what the phases chart reads."""

    @property
    def host(self) -> str: ...
    @property
    def ranks(self) -> Sequence[int]: ...
    @property
    def phases_ms(self) -> Mapping[str, float | None]: ...
    @property
    def step_ms(self) -> float: ...


class RuleAnswer(Protocol):
    """One rule's answer on a run (explain's ``Diagnosis``): what the findings list reads."""

    @property
    def code(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def advice(self) -> str: ...
    @property
    def evidence(self) -> Mapping[str, float | int | str | None]: ...


@dataclass(frozen=True)
class Explained:
    """Why one report row ran as fast as it did, as the page shows it: made by the caller from explain's
    functions (see the module docstring)."""

    row: ReportRow
    run_id: str
    """The run explained (one of the row's runs, read from the page's runs directory)."""
    picked: str
    """Why that run, in words (``the latest valid run with a per-step breakdown``)."""
    verdict: str
    """The verdict's code (``compute-scaling``, ``balanced``, ``unknown``)."""
    line: str
    """The verdict's line: the code and its cause (``compute-scaling: computation scalability 0.75: ...``)."""
    nodes: Sequence[NodeSteps]
    answers: Sequence[RuleAnswer]
    lines: Sequence[str]
    """The POP, computation-scalability and MFU lines, as explain prints them."""


def _png(group: list[ReportRow]) -> str:
    """One configuration's figure as base64 PNG text."""
    from clusterctl.results.plot import configuration_png

    return base64.b64encode(configuration_png(group, dpi=100)).decode("ascii")


def _run(record: RunRecord, run_dir: Path, page_dir: Path) -> dict[str, object]:
    """What the page says of one run read from ``run_dir``; its link is relative to the page's directory,
    made from the directory's name (percent-encoded, starting with a dot: never a scheme)."""
    metric = record.metrics.get(record.primary_metric)
    value = f"{record.value:,.2f} {metric.unit if metric else ''}".strip() if record.value else "no result"
    return {
        "id": record.run_id,
        "link": _link(run_dir, page_dir),
        "started": record.started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "what": f"{record.config.workload} on {record.nodes} node(s), {record.world_size} rank(s) "
        f"via {record.launcher}",
        "value": value,
        "valid": record.valid,
        "fabric": record.fabric.transport + (" GDRDMA" if record.fabric.gdr else ""),
        "findings": record.findings,
    }


def _link(run_dir: Path, page_dir: Path) -> str:
    """A link to ``run_dir`` relative to ``page_dir``: percent-encoded, starting with a dot (never a scheme)."""
    link = os.path.relpath(run_dir, page_dir).replace(os.sep, "/") + "/"
    return quote(link if link.startswith(".") else f"./{link}")


def _finite(value: float | None) -> float:
    """A phase's milliseconds as the chart draws them: nothing (0) for no figure, NaN, infinity or less
    than zero (no measurement)."""
    return value if value is not None and math.isfinite(value) and 0 <= value < 1e12 else 0.0


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


@dataclass(frozen=True)
class Segment:
    """One phase of one node's bar: its name, its milliseconds in words, where it starts and how wide."""

    name: str
    ms: str
    x: float
    w: float
    colour: str


@dataclass(frozen=True)
class Bar:
    """One node's bar: its host (``label`` cut to fit the names' column), ranks, row, phases, step."""

    host: str
    label: str
    ranks: int
    y: int
    segments: list[Segment]
    step: str
    end: float
    """Where the step's label starts, just after the bar."""


@dataclass(frozen=True)
class Swatch:
    """One legend entry: a phase's name and colour, and where it is drawn."""

    name: str
    colour: str
    x: float


@dataclass(frozen=True)
class Chart:
    """The phases chart's geometry (CSS pixels): its size, the bars' height, the legend, one bar per node."""

    width: int
    height: int
    bar_h: int
    legend: list[Swatch]
    bars: list[Bar]


def phases_chart(nodes: Sequence[NodeSteps]) -> Chart:
    """The phases per node as the template draws them in SVG: one horizontal bar per node, its phases
    stacked in the explanation's order and the step's unaccounted rest as ``other``, every bar on one
    scale (the longest step fills the bars' width). Pure geometry; the template escapes every name."""
    names = list(dict.fromkeys(name for n in nodes for name in n.phases_ms))
    colours = {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(names)} | {_OTHER: _OTHER_COLOUR}
    longest = max(
        (max(_finite(n.step_ms), sum(map(_finite, n.phases_ms.values()))) for n in nodes), default=0
    )
    scale = _BARS_W / longest if longest > 0 else 0.0
    bars = []
    for i, node in enumerate(nodes):
        parts = [(name, _finite(node.phases_ms.get(name))) for name in names]
        parts.append((_OTHER, max(0.0, _finite(node.step_ms) - sum(ms for _, ms in parts))))
        x, segments = float(_LABEL_W), []
        for name, ms in parts:
            if ms * scale >= 0.05:  # thinner than a twentieth of a pixel: nothing to see
                segments.append(Segment(name.replace("_", " "), _ms(ms), round(x, 2), round(ms * scale, 2),
                                        colours[name]))  # fmt: skip
                x += ms * scale
        label = node.host if len(node.host) <= 14 else node.host[:13] + "…"
        bars.append(Bar(node.host, label, len(node.ranks), _LEGEND_H + i * _ROW_H, segments,
                        _ms(_finite(node.step_ms)), round(x + 6, 2)))  # fmt: skip
    legend, x = [], float(_LABEL_W)
    for name in [*names, _OTHER]:
        legend.append(Swatch(name.replace("_", " "), colours[name], round(x, 2)))
        x += 14 + _CHAR_W * len(legend[-1].name) + 12  # the swatch, its label at 12 px, a gap
    return Chart(width=max(_LABEL_W + _BARS_W + _STEP_W, math.ceil(x)),
                 height=_LEGEND_H + len(bars) * _ROW_H + 4, bar_h=_BAR_H, legend=legend, bars=bars)  # fmt: skip


def _evidence(value: float | int | str | None) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _named(row: ReportRow) -> str:
    """A row in words: ``resnet50 via slurm on 2 devices``."""
    return f"{row.workload_label} on {row.devices} device{'s' if row.devices > 1 else ''}"


def _why(explained: Explained, history: History, runs_dir: Path, page_dir: Path) -> dict[str, object]:
    """What the page says of one explained row."""
    row = explained.row
    directory = history.directories.get(explained.run_id)
    found = [a for a in explained.answers if a.status == "found"]
    return {
        "title": f"{_named(row)}, {','.join(map(str, row.nodes))} node{'' if row.nodes == [1] else 's'}",
        "verdict": explained.verdict,
        "cause": explained.line.removeprefix(f"{explained.verdict}: "),
        "run_id": explained.run_id,
        "link": None if directory is None else _link(runs_dir / directory, page_dir),
        "picked": explained.picked,
        "chart": phases_chart(explained.nodes) if explained.nodes else None,
        "lines": list(explained.lines),
        "found": [_answer(a) for a in found],
        "others": [_answer(a) for a in explained.answers if a.status != "found"],
    }


def _answer(answer: RuleAnswer) -> dict[str, object]:
    return {
        "code": answer.code,
        "severity": answer.severity,
        "status": answer.status,
        "message": answer.message,
        "advice": answer.advice,
        "evidence": [f"{k} {_evidence(v)}" for k, v in answer.evidence.items() if v is not None],
    }


def _key_columns(rows: list[ReportRow], headers: list[str]) -> list[int]:
    """The indexes in ``headers`` of the columns the terminal would show at ``KEY_WIDTH`` columns."""
    from clusterctl.results.report_table import report_table

    table, _ = report_table(rows, KEY_WIDTH)
    shown = {str(column.header) for column in table.columns}
    return [i for i, header in enumerate(headers) if header in shown]


def render_html(
    rows: list[ReportRow],
    history: History,
    runs_dir: Path,
    page_dir: Path,
    explained: Sequence[Explained] = (),
) -> str:
    """The page for ``rows`` (the report of ``runs_dir``) and ``history`` (its records, read from there),
    with links to the run directories relative to ``page_dir``, where the page will be written, and
    ``explained``: why each row explained ran as it did (rows without one are named as not explained)."""
    from clusterctl.results.plot import MAX_PANELS, configurations, title_of
    from clusterctl.results.report_table import meaning, report_cells

    headers, cells = report_cells(rows)
    key = _key_columns(rows, headers) if rows else []
    done = {id(e.row) for e in explained}
    groups = configurations(rows) if any(r.median is not None for r in rows) else []
    figures = [{"title": title_of(g[0].config), "png": _png(g)} for g in groups[:MAX_PANELS]]
    return (
        html_environment()
        .get_template(TEMPLATE)
        .render(
            title=f"clusterctl report: {runs_dir.name or runs_dir}",
            runs_dir=str(runs_dir),
            made=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            why=[_why(e, history, runs_dir, page_dir) for e in explained],
            unexplained=[_named(r) for r in rows if id(r) not in done],
            key_headers=[headers[i] for i in key],
            key_cells=[[row[i] for i in key] for row in cells],
            more=[h for i, h in enumerate(headers) if i not in key],
            headers=headers,
            cells=cells,
            meanings=[m for row in rows if (m := meaning(row))],
            figures=figures,
            left_out=max(0, len(groups) - MAX_PANELS),
            runs=[
                _run(r, runs_dir / history.directories[r.run_id], page_dir) for r in reversed(history.runs)
            ],
            generator=GENERATOR,
        )
    )


def write_html(
    rows: list[ReportRow],
    history: History,
    runs_dir: Path,
    directory: Path,
    explained: Sequence[Explained],
) -> Path:
    """Write the page (``render_html``) to ``directory/index.html`` (the directory made when missing)
    and return its path.

    An ``index.html`` already there is replaced only when it is a page this command wrote (its generator
    mark); the new page is written beside it and renamed over it, so a symbolic link there is replaced,
    never written through, and a reader sees the old page or the new one.

    Raises:
        InputError: ``index.html`` there is a symbolic link, not a regular file, or a page clusterctl did
            not write (nothing is written).
        OSError: the page cannot be written (no permission, a full disk).
    """
    directory.mkdir(parents=True, exist_ok=True)
    page = directory / PAGE
    _refuse_foreign_page(page)
    text = render_html(rows, history, runs_dir.resolve(), directory.resolve(), explained)
    handle, temporary = tempfile.mkstemp(prefix=f".{PAGE}.", suffix=".new", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        _refuse_foreign_page(page)  # checked again just before the switch
        os.replace(temporary, page)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return page


def _refuse_foreign_page(page: Path) -> None:
    """Raise InputError unless ``page`` is absent or a regular file carrying this command's mark. It is
    opened without following a symbolic link and without blocking, and only its head is read."""
    fix = (
        "move it away, or pass --html a directory of its own (report --html replaces only an index.html it "
        "wrote)"
    )
    try:
        fd = os.open(page, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"--html {page}: is a symbolic link; report never writes through one. Fix: {fix}."
            ) from None
        raise InputError(f"--html {page}: cannot be read ({exc.strerror}). Fix: {fix}.") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        head = os.read(fd, _HEAD_BYTES) if regular else b""
    finally:
        os.close(fd)
    if not regular:
        raise InputError(f"--html {page}: is not a regular file. Fix: {fix}.")
    if _MARK not in head and not head.startswith(_BEFORE_THE_MARK):
        raise InputError(f"--html {page}: a page clusterctl did not write is there. Fix: {fix}.")
