"""`report` on real run directories (tests/fixtures/runs/: 1 and 2 nodes through ssh, 2 nodes through
slurm, from the sandbox): what it reads is their result.json files, so with no index, a rebuilt one, a
stale one or after deleting it, the table is the same."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.results.history import add_run, history_path, load_runs
from clusterctl.results.record import read_record
from tests.helpers.strictjson import report_rows

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A copy of the real run directories, without an index (as they are kept)."""
    return Path(shutil.copytree(FIXTURE_RUNS, tmp_path / "runs", ignore=shutil.ignore_patterns("*.md")))


def _report(capsys: pytest.CaptureFixture[str], runs: Path, *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["report", "--runs-dir", str(runs), *argv]) == 0
    return capsys.readouterr()


def test_the_real_runs_report_one_row_per_node_count_and_launcher(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = _report(capsys, runs, "--json")
    rows = report_rows(out)
    assert err == ""
    assert {r["schema"] for r in rows} == {"clusterctl.report-row/2"}  # each row says its version
    assert [(r["launcher"], r["devices"], r["nodes"], r["runs"], r["invalid_runs"]) for r in rows] == [
        ("ssh", 1, [1], 1, 0),
        ("ssh", 2, [2], 1, 0),
        ("slurm", 2, [2], 1, 0),
    ]
    one, two, slurm = rows
    records = {r.run_id: r for r in (read_record(d) for d in sorted(runs.iterdir()))}
    assert one["median"] == records["20261125T170728Z_resnet50_1n"].value
    assert two["median"] == records["20261125T170753Z_resnet50_2n"].value
    # the slurm row's speedup is against the 1-device ssh run: there is no 1-device slurm run
    assert slurm["speedup"] == pytest.approx(records["20261125T170842Z_resnet50_2n"].value / one["median"])
    assert two["fabric_gb_per_node"] and slurm["fabric_gb_per_node"]  # counters read both ways


def test_deleting_or_rebuilding_the_index_gives_the_same_table(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    modes = [["--wide"], ["--json"], [], ["--csv", str(runs.parent / "report.csv")]]
    without = [_report(capsys, runs, *mode)[0] for mode in modes]
    assert not history_path(runs).exists(), "report without --rebuild-index wrote an index"
    out, err = _report(capsys, runs, "--rebuild-index", "--wide")
    assert out == without[0] and "indexed 3 run directories" in err
    assert load_runs(runs).index == "current"
    assert [_report(capsys, runs, *mode)[0] for mode in modes] == without  # through the index
    history_path(runs).unlink()
    assert [_report(capsys, runs, *mode)[0] for mode in modes] == without


def test_a_stale_index_changes_nothing_and_the_next_run_brings_it_up_to_date(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm = runs / "20261125T170842Z_resnet50_2n"
    aside = runs.parent / slurm.name
    slurm.rename(aside)
    _report(capsys, runs, "--rebuild-index")  # an index of the two ssh runs only
    slurm_less, _ = _report(capsys, runs, "--json")
    aside.rename(slurm)  # a run directory the index lacks: read all the same
    assert load_runs(runs).index == "stale"
    out, err = _report(capsys, runs, "--json")
    assert [r["launcher"] for r in report_rows(out)] == ["ssh", "ssh", "slurm"] and err == ""
    assert len(report_rows(slurm_less)) == 2
    add_run(history_path(runs), read_record(slurm), slurm)  # what the conductor does after a run
    assert load_runs(runs).index == "current" and _report(capsys, runs, "--json")[0] == out
