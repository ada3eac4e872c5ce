"""The report as one self-contained HTML page, for sharing a cluster's acceptance result: the report
table and what each multi-device row means, one figure per configuration embedded as a base64 PNG, and every run with its verdict, its
findings and a link to its run directory. Nothing is loaded from elsewhere (no script, no stylesheet, no
font): the page reads the same from a mail attachment as from the machine that made it.

A run's link is made from the name of the directory its record was read from (percent-encoded, always
relative), never from what the record says: a crafted ``run_id`` cannot become a ``javascript:`` link,
and a renamed run directory still links right. The page carries a generator mark; ``write_html``
replaces only a page that carries it, never writes through a symbolic link, and switches the new page
in with one rename."""

from __future__ import annotations

import base64
import errno
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
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


def _png(group: list[ReportRow]) -> str:
    """One configuration's figure as base64 PNG text."""
    from clusterctl.results.plot import configuration_png

    return base64.b64encode(configuration_png(group, dpi=100)).decode("ascii")


def _run(record: RunRecord, run_dir: Path, page_dir: Path) -> dict[str, object]:
    """What the page says of one run read from ``run_dir``; its link is relative to the page's directory,
    made from the directory's name (percent-encoded, starting with a dot: never a scheme)."""
    metric = record.metrics.get(record.primary_metric)
    value = f"{record.value:,.2f} {metric.unit if metric else ''}".strip() if record.value else "no result"
    link = os.path.relpath(run_dir, page_dir).replace(os.sep, "/") + "/"
    link = quote(link if link.startswith(".") else f"./{link}")
    return {
        "id": record.run_id,
        "link": link,
        "started": record.started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "what": f"{record.config.workload} on {record.nodes} node(s), {record.world_size} rank(s) "
        f"via {record.launcher}",
        "value": value,
        "valid": record.valid,
        "fabric": record.fabric.transport + (" GDRDMA" if record.fabric.gdr else ""),
        "findings": record.findings,
    }


def render_html(rows: list[ReportRow], history: History, runs_dir: Path, page_dir: Path) -> str:
    """The page for ``rows`` (the report of ``runs_dir``) and ``history`` (its records, read from there),
    with links to the run directories relative to ``page_dir``, where the page will be written."""
    from clusterctl.results.plot import MAX_PANELS, configurations, title_of
    from clusterctl.results.report_table import meaning, report_cells

    headers, cells = report_cells(rows)
    groups = configurations(rows) if any(r.median is not None for r in rows) else []
    figures = [{"title": title_of(g[0].config), "png": _png(g)} for g in groups[:MAX_PANELS]]
    return (
        html_environment()
        .get_template(TEMPLATE)
        .render(
            title=f"clusterctl report: {runs_dir.name or runs_dir}",
            runs_dir=str(runs_dir),
            made=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
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


def write_html(rows: list[ReportRow], history: History, runs_dir: Path, directory: Path) -> Path:
    """Write the page to ``directory/index.html`` (the directory made when missing) and return its path.

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
    text = render_html(rows, history, runs_dir.resolve(), directory.resolve())
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
