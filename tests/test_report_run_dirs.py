"""What `report` and `explain` read from run directories they did not write (issue 37 item 4): links
made from directory names, never from a record's ``run_id``; a FIFO or a device planted among a run's
files neither hangs nor exhausts memory; a huge ``result.json`` is left out with its reason; a copied
run directory is one run, named as a copy, not counted twice nor called half-written.

The CLI runs in a subprocess with a deadline, so a read that blocks fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.results.history import load_runs
from clusterctl.results.record import RESULT_FILE, RunRecord
from clusterctl.results.telemetry import telemetry_path
from tests.helpers.breakdowns import OLD_RUN, THROTTLED, breakdown_record, cpu_samples
from tests.helpers.rundirs import record_run

RUN = "20261125T210000Z_resnet50_2n"
DEADLINE_S = 120


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The old real run (no breakdown) and a throttled 2-node run with node1's telemetry."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(OLD_RUN, runs / OLD_RUN.name)
    directory = record_run(runs, breakdown_record(THROTTLED).model_copy(update={"run_id": RUN}))
    path = telemetry_path(directory, "node1")
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(s.model_dump_json() + "\n" for s in cpu_samples(0.5)))
    return runs


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``clusterctl ARGS`` as a user runs it, under a deadline (a hang fails here, as TimeoutExpired)."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "clusterctl", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=env,
    )


def _set_run_id(directory: Path, run_id: str) -> None:
    result = directory / RESULT_FILE
    record = RunRecord.model_validate_json(result.read_text())
    result.write_text(record.model_copy(update={"run_id": run_id}).model_dump_json())


def test_links_come_from_directory_names_never_from_the_recorded_run_id(runs: Path, tmp_path: Path) -> None:
    _set_run_id(runs / OLD_RUN.name, "javascript:alert(document.domain)")
    (runs / RUN).rename(runs / "renamed-run")
    for page_dir in (tmp_path / "page", runs):  # beside the runs, and among them (a bare relative link)
        done = _cli("report", "--runs-dir", str(runs), "--html", str(page_dir))
        assert done.returncode == 0, done.stderr
        html = (page_dir / "index.html").read_text()
        links = re.findall(r'href="([^"]*)"', html)
        assert links and not any(re.match(r"[a-z][a-z0-9+.-]*:", link, re.IGNORECASE) for link in links)
        targets = {(page_dir / link).resolve() for link in links}
        assert targets == {(runs / OLD_RUN.name).resolve(), (runs / "renamed-run").resolve()}


def test_a_fifo_or_a_device_under_telemetry_neither_hangs_nor_exhausts_memory(runs: Path) -> None:
    folder = telemetry_path(runs / RUN, "node1").parent
    os.mkfifo(folder / "node2.jsonl")  # nobody ever writes to it: a plain open() blocks forever
    (folder / "node3.jsonl").symlink_to("/dev/zero")  # read whole: MemoryError
    done = _cli("explain", str(runs / RUN), "--json")
    assert done.returncode == 0, done.stderr
    done = _cli("report", "--runs-dir", str(runs))
    assert done.returncode == 0, done.stderr
    assert "straggler" in done.stdout  # the verdict still comes from what could be read


def test_a_huge_or_device_result_json_is_left_out_with_its_reason(runs: Path) -> None:
    huge = runs / "20261126T000000Z_resnet50_2n"
    huge.mkdir()
    with (huge / RESULT_FILE).open("wb") as out:
        out.truncate(1 << 40)  # a sparse terabyte: read whole, MemoryError
    device = runs / "20261126T000001Z_resnet50_2n"
    device.mkdir()
    (device / RESULT_FILE).symlink_to("/dev/zero")
    fifo = runs / "20261126T000002Z_resnet50_2n"
    fifo.mkdir()
    os.mkfifo(fifo / RESULT_FILE)
    history = load_runs(runs)
    assert len(history.runs) == 2
    assert any(str(huge) in line and "larger than the limit" in line for line in history.skipped)
    assert sum("not a regular file" in line for line in history.skipped) == 2
    for run in (huge, device, fifo):
        done = _cli("explain", str(run))
        assert done.returncode == 2 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    done = _cli("report", "--runs-dir", str(runs))
    assert done.returncode == 0 and "3 history entries left out" in done.stderr


def test_a_copied_run_directory_is_one_run_named_as_a_copy(runs: Path) -> None:
    before = _cli("report", "--runs-dir", str(runs), "--json")
    shutil.copytree(runs / RUN, runs / "copy-of-the-run")
    history = load_runs(runs)
    assert [r.run_id for r in history.runs].count(RUN) == 1 and history.directories[RUN] == RUN
    assert history.copies == {"copy-of-the-run": RUN}
    after = _cli("report", "--runs-dir", str(runs), "--json")
    assert after.returncode == 0 and after.stdout == before.stdout  # counted once
    assert f"{runs / 'copy-of-the-run'}: a copy of run {RUN}" in " ".join(after.stderr.split())
    done = _cli("explain", str(runs / "copy-of-the-run"))
    assert done.returncode == 0, done.stderr
    assert "half-written" not in done.stdout + done.stderr and "straggler" in done.stdout


def test_report_html_replaces_only_its_own_page_and_never_writes_through_a_link(
    runs: Path, tmp_path: Path
) -> None:
    page_dir = tmp_path / "site"
    page_dir.mkdir()
    theirs = page_dir / "index.html"
    theirs.write_text("<html>the team's own start page</html>")
    done = _cli("report", "--runs-dir", str(runs), "--html", str(page_dir))
    assert done.returncode == 2 and "a page clusterctl did not write" in done.stderr
    assert theirs.read_text() == "<html>the team's own start page</html>"
    target = tmp_path / "elsewhere.txt"
    target.write_text("not a page")
    theirs.unlink()
    theirs.symlink_to(target)
    done = _cli("report", "--runs-dir", str(runs), "--html", str(page_dir))
    assert done.returncode == 2 and "symbolic link" in done.stderr
    assert target.read_text() == "not a page" and theirs.is_symlink()
    theirs.unlink()
    os.mkfifo(theirs)
    done = _cli("report", "--runs-dir", str(runs), "--html", str(page_dir))
    assert done.returncode == 2 and "not a regular file" in done.stderr
    theirs.unlink()
    before_the_mark = '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    before_the_mark += '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    theirs.write_text(
        before_the_mark + "<title>clusterctl report: runs</title>"
    )  # an older clusterctl's page
    for _ in range(2):  # its own page, replaced, and replaced again
        done = _cli("report", "--runs-dir", str(runs), "--html", str(page_dir))
        assert done.returncode == 0, done.stderr
    assert [p.name for p in page_dir.iterdir()] == ["index.html"]  # nothing left aside
