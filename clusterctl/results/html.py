"""The report as one self-contained HTML page, for sharing a cluster's acceptance result: the report
table and what each multi-device row means, one figure per configuration embedded as a base64 PNG, and every run with its verdict, its
findings and a link to its run directory. Nothing is loaded from elsewhere (no script, no stylesheet, no
font): the page reads the same from a mail attachment as from the machine that made it."""

from __future__ import annotations

import base64
import io
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.templating import html_environment

if TYPE_CHECKING:
    from clusterctl.results.record import RunRecord
    from clusterctl.results.report import ReportRow

TEMPLATE = "report.html.j2"


def _png(group: list[ReportRow]) -> str:
    """One configuration's figure as base64 PNG text."""
    from clusterctl.results.plot import configuration_figure

    buffer = io.BytesIO()
    configuration_figure(group).savefig(buffer, dpi=100, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _run(record: RunRecord, runs_dir: Path, page_dir: Path) -> dict[str, object]:
    """What the page says of one run; its link is relative to the page's directory."""
    metric = record.metrics.get(record.primary_metric)
    value = f"{record.value:,.2f} {metric.unit if metric else ''}".strip() if record.value else "no result"
    link = os.path.relpath(runs_dir / record.run_id, page_dir).replace(os.sep, "/") + "/"
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


def render_html(rows: list[ReportRow], runs: list[RunRecord], runs_dir: Path, page_dir: Path) -> str:
    """The page for ``rows`` (the report of ``runs_dir``) and ``runs`` (its records), with links to the
    run directories relative to ``page_dir``, where the page will be written."""
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
            runs=[_run(r, runs_dir, page_dir) for r in reversed(runs)],
        )
    )


def write_html(rows: list[ReportRow], runs: list[RunRecord], runs_dir: Path, directory: Path) -> Path:
    """Write the page to ``directory/index.html`` (the directory made when missing) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    page = directory / "index.html"
    page.write_text(render_html(rows, runs, runs_dir.resolve(), directory.resolve()), encoding="utf-8")
    return page
