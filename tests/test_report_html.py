"""`report --html DIR`: one self-contained page, escaped, opened in a real headless chromium (Debian's,
installed by scripts/setup-env.sh) that must load it without a console error and show the table.

Chromium writes each console message of the page to stderr as ``INFO:CONSOLE...`` with
``--enable-logging=stderr --v=0``; a probe script added to a copy of the page reports, after the load
event, every image that did not decode (a resource failure is not a console message by itself). The
probe is first shown to catch a broken page, so a silent chromium cannot pass the test."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.findings import Finding
from clusterctl.results.history import History
from clusterctl.results.html import render_html
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report
from tests.test_report import record

RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"
CHROMIUM = shutil.which("chromium")
PROBE = (
    '<script>window.addEventListener("load", () => { for (const i of document.images) { if (!i.naturalWidth) '
    'console.error("image not loaded: " + i.alt); } console.log("probe: " + document.images.length + " images"); '
    "});</script>"
)
CONSOLE = re.compile(r':CONSOLE[:(]\d+\)?\] "(.*)", source: ')


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


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The real run directories of tests/fixtures/runs, copied (the report writes its index there)."""
    return Path(shutil.copytree(RUNS, tmp_path / "runs"))


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
    assert '<table id="report">' in dom and dom.count("<tr>") >= 4  # header and the three rows
    assert "20261125T170842Z_resnet50_2n" in dom
