"""`report --html DIR`: one self-contained page, escaped, opened in a real headless chromium (Debian's,
installed by scripts/setup-env.sh) that must load it without a console error and show the table, and
that shows, in a 1280x800 window, each configuration's verdict and phases without a sideways scroll.

Chromium writes each console message of the page to stderr as ``INFO:CONSOLE...`` with
``--enable-logging=stderr --v=0``; a probe script added to a copy of the page reports, after the load
event, every image that did not decode (a resource failure is not a console message by itself). The
probe is first shown to catch a broken page, so a silent chromium cannot pass the test. The layout
check is a second probe that writes what it measured (the document's scroll width, the right edge of
everything shown, the verdict's and the phases chart's boxes) into the DOM chromium dumps; it too is
first shown to catch a page that scrolls sideways. The pages come from recorded run directories
(tests/fixtures/runs, tests/fixtures/explain/scaling): no sandbox."""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.explain.explanation import NodePhases
from clusterctl.explain.model import Diagnosis
from clusterctl.findings import Finding
from clusterctl.results.history import History
from clusterctl.results.html import Explained, phases_chart, render_html
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report
from tests.helpers.records import record

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUNS = FIXTURES / "runs"
# A 1-node and a 2-node run of one configuration with per-step breakdowns, and the preflight (README.md
# there): the 2-node run's verdict is compute-scaling.
SCALING = FIXTURES / "explain" / "scaling"
WINDOW = (1280, 800)
CHROMIUM = shutil.which("chromium")
PROBE = (
    '<script>window.addEventListener("load", () => { for (const i of document.images) { if (!i.naturalWidth) '
    'console.error("image not loaded: " + i.alt); } console.log("probe: " + document.images.length + " images"); '
    "});</script>"
)
CONSOLE = re.compile(r':CONSOLE[:(]\d+\)?\] "(.*)", source: ')
# After the load event: what the page looks like in the window, written into the DOM as JSON. ``right``
# is the right edge of everything laid out (a table cut by its own scroll box counts; what a closed
# <details> holds does not, though chromium keeps its boxes); each box is [left, top, right, bottom].
MEASURE = (
    '<script>window.addEventListener("load", () => { const box = (e) => { if (!e) return null; '
    "const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }; "
    "const m = { scrollWidth: document.scrollingElement.scrollWidth, width: innerWidth, height: innerHeight, "
    'right: Math.max(0, ...[...document.body.querySelectorAll("*")].filter((e) => !e.closest("details:not([open]) '
    '> :not(summary)")).map((e) => e.getBoundingClientRect().right)), '
    'verdicts: [...document.querySelectorAll("p.verdict")].map(box), '
    'phases: [...document.querySelectorAll("svg.phases")].map(box), report: box(document.getElementById("report")) }; '
    'const out = document.createElement("pre"); out.id = "measured"; out.textContent = JSON.stringify(m); '
    "document.body.appendChild(out); });</script>"
)
MEASURED = re.compile(r'<pre id="measured">(.*?)</pre>')


def _open(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM chromium built from a probed copy of ``page``, and the page's console messages."""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, CONSOLE.findall(done.stderr)


@dataclass(frozen=True)
class Seen:
    """What ``MEASURE`` measured (CSS pixels); a box is [left, top, right, bottom]."""

    scroll_width: float
    width: float
    height: float
    right: float
    verdicts: list[list[float]]
    phases: list[list[float]]
    report: list[float] | None


def _look(page: Path, tmp_path: Path) -> tuple[Seen, Path]:
    """What ``MEASURE`` measured in a measured copy of ``page`` in a ``WINDOW``-sized chromium, and the
    screenshot of that window, saved under ``tmp_path``."""
    measured = tmp_path / f"measured-{page.stem}.html"
    measured.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    shot = tmp_path / f"{page.parent.name}-{page.stem}-{WINDOW[0]}x{WINDOW[1]}.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
         f"--screenshot={shot}", "--dump-dom", measured.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = MEASURED.search(done.stdout)
    assert found, f"the probe wrote nothing: {done.stdout[-2000:]}"
    m = json.loads(found.group(1).replace("&quot;", '"'))
    return Seen(
        m["scrollWidth"], m["width"], m["height"], m["right"], m["verdicts"], m["phases"], m["report"]
    ), shot


def _png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The real run directories of tests/fixtures/runs, copied (the report writes its index there)."""
    return Path(shutil.copytree(RUNS, tmp_path / "runs"))


@pytest.fixture
def scaling(tmp_path: Path) -> Path:
    """The real run directories of tests/fixtures/explain/scaling, copied (the report indexes them)."""
    return Path(shutil.copytree(SCALING, tmp_path / "scaling", ignore=shutil.ignore_patterns("*.md")))


def _page(runs_dir: Path, tmp_path: Path) -> Path:
    """``report --html`` of ``runs_dir``, written under ``tmp_path``."""
    assert main(["report", "--runs-dir", str(runs_dir), "--html", str(tmp_path / "page")]) == 0
    return tmp_path / "page" / "index.html"


def _section(html: str, number: int) -> str:
    """The page's ``number``-th configuration section."""
    start = html.index(f'<section class="why" id="why-{number}">')
    return html[start : html.index("</section>", start)]


def test_the_page_explains_each_configuration(scaling: Path, tmp_path: Path) -> None:
    html = _page(scaling, tmp_path).read_text()
    one, two = _section(html, 1), _section(html, 2)
    assert 'id="why-3"' not in html  # the collective is no configuration to explain
    assert (
        "<h3>resnet50 on 1 device, 1 node</h3>" in one
        and '<p class="verdict balanced"><b>balanced</b>: ' in one
    )
    # The verdict with its one-line cause, then the run it was read from (linked), as explain says them.
    assert (
        '<p class="verdict compute-scaling"><b>compute-scaling</b>: the compute is the limit, not the fabric: computation scalability 0.75: each rank '
        "computes 1.3x as long per step as on 1 device</p>" in two
    )
    assert '<a href="../scaling/20261126T003332Z_resnet50_2n/">20261126T003332Z_resnet50_2n</a>' in two
    # The phases per node: one bar per node, in the chart drawn inline.
    assert two.count('<g class="node">') == 2 and "<title>node2 exposed comm: 1,216 ms</title>" in two
    # POP, computation scalability and MFU, as explain prints them.
    assert "POP: parallel efficiency 0.94 = load balance 0.96 x comm. efficiency 0.98<br>" in two
    assert "computation scalability 0.75 (9,179 ms of compute per step on 1 device, 12,234 here)" in two
    assert "MFU: 27.8% (0.00248 TFLOP/s of 0.00446 per device, measured peak)" in two
    # The finding with its advice and evidence; the rules that found nothing behind a toggle.
    found = two[two.index('<ul class="rules found">') : two.index("<details>")]
    assert found.count("<li>") == 1 and "<b>compute-scaling</b>: computation scalability 0.75" in found
    assert "<b>advice:</b> compute and communication contend for the CPUs" in found
    assert (
        "evidence: computation_scalability 0.75, global_efficiency 0.707, parallel_efficiency 0.942" in found
    )
    assert "<summary>8 more rules: clear or unknown</summary>" in two
    assert "<b>not-overlapped</b>: clear: 89% of the allreduce hidden behind backward" in two
    assert "<b>gpu-idle</b>: unknown: no GPU utilisation" in two
    assert "Not explained (no valid run of it recorded a per-step breakdown): allreduce on 2 devices." in html
    # The table's verdict column says what the section says; its key columns first, the rest behind a toggle.
    table = html[
        html.index('<table id="report" class="key">') : html.index("</table>", html.index('id="report"'))
    ]
    assert '<td class="num">compute-scaling</td>' in table and "<th>verdict</th>" in table
    assert "<th>predicted</th>" not in table and "<th>predicted</th>" in html.split('id="every-column"')[1]
    assert re.search(r"<summary>Every column \([^)]*predicted[^)]*more\)</summary>", html)
    # Each section's verdict is the table's verdict column for its row.
    headers = re.findall(r"<th>([^<]*)</th>", table)
    verdicts = {
        f"{cells[headers.index('workload')]} on {cells[headers.index('devices')]}": cells[
            headers.index("verdict")
        ]
        for cells in (re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in table.split("<tr>")[2:])
    }
    sections = dict(
        re.findall(r'<h3>(\S+ on \d+) devices?, [^<]*</h3>\n<p class="verdict [^"]*"><b>([^<]*)</b>', html)
    )
    assert sections == {"resnet50 on 1": "balanced", "resnet50 on 2": "compute-scaling"}
    assert all(verdicts[row] == verdict for row, verdict in sections.items()), (verdicts, sections)
    # Offline: every resource is in the page; the only links are to the run directories beside it.
    assert all(v.startswith("data:image/png;base64,") for v in re.findall(r'\ssrc="([^"]*)"', html))
    assert all(v.startswith("../scaling/") for v in re.findall(r'\shref="([^"]*)"', html))
    assert not re.search(r"<link|<script|@import|url\(", html)


def test_a_page_of_runs_without_a_breakdown_says_none_is_explained(runs: Path, tmp_path: Path) -> None:
    html = _page(runs, tmp_path).read_text()
    assert '<section class="why"' not in html and "<svg" not in html
    assert (
        "Not explained (no valid run of it recorded a per-step breakdown): resnet50 on 1 device; resnet50 on "
        "2 devices; resnet50 via slurm on 2 devices." in html
    )


def _node(host: str, step: float, **phases: float | None) -> NodePhases:
    return NodePhases(host=host, ranks=[0], phases_ms=phases, step_ms=step, useful_ms=None)


def test_the_phases_chart_draws_every_node_to_one_scale() -> None:
    a_node = _node("a", 100.0, forward=30.0, backward=50.0, exposed_comm=10.0)  # 10 ms in no phase: other
    b_node = _node("b", 200.0, forward=60.0, backward=float("nan"), exposed_comm=-5.0)
    chart = phases_chart([a_node, b_node])
    a, b = ({s.name: s.w for s in bar.segments} for bar in chart.bars)
    full = b["forward"] + b["other"]  # the longest step fills the bars
    assert math.isclose(full, 520) and math.isclose(a["forward"], full * 30 / 200)
    assert list(a) == ["forward", "backward", "exposed comm", "other"] and math.isclose(
        a["other"], full * 10 / 200
    )
    assert list(b) == ["forward", "other"]  # NaN and a negative time are no measurement: drawn as nothing
    assert [s.name for s in chart.legend] == ["forward", "backward", "exposed comm", "other"]
    assert all(left.x < right.x for left, right in itertools.pairwise(chart.legend))
    assert [bar.y for bar in chart.bars] == [24, 50] and chart.height == 24 + 2 * 26 + 4
    assert phases_chart([]).bars == []


def test_explanations_are_escaped() -> None:
    shady = record("r1", 8, 640.0)
    history = History(runs=[shady], directories={"r1": "r1"})
    rows = build_report([shady], load_references())
    answer = Diagnosis(status="found", severity="warning", code="straggler", message="<img src=x> slow",
                       advice="look at <b>", evidence={"node": "<script>"})  # fmt: skip
    explained = Explained(row=rows[0], run_id="r1", picked="the latest", verdict="straggler",
                          line="straggler: <i>node</i> & co", nodes=[_node("<svg onload=1>", 10.0, forward=5.0)],
                          answers=[answer], lines=["POP: <u>"])  # fmt: skip
    html = render_html(rows, history, Path("/runs"), Path("/page"), [explained])
    for raw in ("<img src=x>", "<b>\n", "<script>", "<i>node", "<svg onload", "<u>"):
        assert raw not in html
    assert "&lt;i&gt;node&lt;/i&gt; &amp; co" in html and "&lt;svg onload=1&gt;" in html


def test_the_page_has_the_table_the_figure_and_each_runs_findings_and_link(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--runs-dir", str(runs), "--html", str(tmp_path / "page")]) == 0
    assert f"report page: {tmp_path / 'page' / 'index.html'}" in capsys.readouterr().err
    html = (tmp_path / "page" / "index.html").read_text()
    assert html.count('<img src="data:image/png;base64,iVBOR') == 1  # one configuration, embedded
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing loaded from elsewhere
    for run in sorted(p.name for p in runs.iterdir() if p.is_dir()):
        assert f'<a href="../runs/{run}/">{run}</a>' in html
    assert "<td>resnet50 via slurm</td>" in html and "<th>efficiency</th>" in html
    assert "<li>resnet50 on 2 devices: 0.59x, 29% efficiency; no collective measured" in html


def test_values_are_escaped() -> None:
    shady = record("r<1>&", 1, 640.0)
    shady.findings = [Finding(severity="warning", code="odd", message="<script>alert(1)</script> & more")]
    history = History(runs=[shady], directories={shady.run_id: shady.run_id})
    html = render_html(build_report([shady], load_references()), history, Path("/runs"), Path("/page"))
    assert (
        "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    )
    assert 'href="../runs/r%3C1%3E%26/">r&lt;1&gt;&amp;</a>' in html


def test_a_missing_html_parent_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["report", "--runs-dir", str(tmp_path), "--html", str(tmp_path / "file")]) == 2
    assert "--html" in capsys.readouterr().err
    assert main(["report", "--runs-dir", str(tmp_path), "--html", str(tmp_path / "no" / "page")]) == 2


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup-env.sh installs it)")
def test_chromium_loads_the_page_without_console_errors(runs: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text('<html><body><img src="data:image/png;base64,AAAA" alt="x"></body></html>')
    _, messages = _open(broken, tmp_path)
    assert messages == ["image not loaded: x", "probe: 1 images"]  # the probe catches a broken page

    assert main(["report", "--runs-dir", str(runs), "--html", str(tmp_path / "page")]) == 0
    dom, messages = _open(tmp_path / "page" / "index.html", tmp_path)
    assert messages == ["probe: 1 images"]  # the figure decoded, and nothing else was said
    assert '<table id="report" class="key">' in dom and dom.count("<tr>") >= 4  # header and the three rows
    assert "20261125T170842Z_resnet50_2n" in dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup-env.sh installs it)")
def test_at_1280_pixels_the_verdict_and_the_phases_show_without_a_sideways_scroll(
    scaling: Path, tmp_path: Path
) -> None:
    wide = tmp_path / "wide" / "index.html"
    wide.parent.mkdir()
    wide.write_text('<html><body><p class="verdict">v</p><div style="overflow-x: auto"><table id="report">'
                    '<tr><td style="min-width: 1500px">x</td></tr></table></div></body></html>')  # fmt: skip
    seen, _ = _look(wide, tmp_path)  # a table cut by its own scroll box: the document does not scroll
    assert seen.scroll_width == WINDOW[0] and seen.right > 1500, seen

    seen, shot = _look(_page(scaling, tmp_path), tmp_path)
    print(f"screenshot of the page at {WINDOW[0]}x{WINDOW[1]}: {shot}")
    assert _png_size(shot) == WINDOW and seen.width == WINDOW[0], seen
    assert seen.scroll_width <= seen.width, seen
    assert seen.right <= seen.width, seen  # nothing laid out beyond the window, not even in a scroll box
    assert len(seen.verdicts) == len(seen.phases) == 2 and seen.report is not None, seen
    for left, top, right, bottom in [*seen.verdicts, *seen.phases, seen.report]:
        assert 0 <= left < right <= seen.width and top < bottom, seen
    # The first configuration's verdict and phases are on the first screen, without scrolling at all.
    assert seen.verdicts[0][3] <= seen.height and seen.phases[0][3] <= seen.height, seen
