"""`clusterctl explain` on run directories: the latest run, a run id, a run directory; --json, --plot;
and bad input (no runs, no such run, half-written, garbled, an old run without a breakdown) exits 2 or
says what is missing, never a traceback. Records are the real fixtures' (tests/test_explain_rules.py)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.explain.gather import worst_row_line
from clusterctl.results.history import load_runs
from clusterctl.results.record import RESULT_FILE
from clusterctl.results.report import build_report
from clusterctl.results.telemetry import telemetry_path
from tests.helpers.breakdowns import DDP, OLD_RUN, THROTTLED, breakdown_record, cpu_samples, gpu_samples
from tests.helpers.rundirs import record_run
from tests.helpers.strictjson import report_rows, strict_loads


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A runs directory with the old run (no breakdown) and, later, the throttled 2-node run."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(OLD_RUN, runs / OLD_RUN.name)
    record = breakdown_record(THROTTLED).model_copy(update={"run_id": "20261125T210000Z_resnet50_2n"})
    directory = record_run(runs, record)
    for node, samples in (("node1", cpu_samples(0.5)), ("node2", cpu_samples(1.0) + gpu_samples([0.9, 0.0]))):
        path = telemetry_path(directory, node)
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(s.model_dump_json() + "\n" for s in samples) + '{"t": 1, "cpu": \n')
    return runs


def test_the_latest_run_is_explained_verdict_first_within_80_columns(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["explain", "--runs-dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("straggler: node2 computes ")
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    for part in ("node1", "node2", "POP: parallel efficiency", "MFU:", "advice:", "telemetry: node1, node2"):
        assert part in text, part
    assert text.index("POP:") < text.index("warning straggler")


def test_json_is_strict_and_names_the_finding_node_and_evidence(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "20261125T210000Z_resnet50_2n", "--runs-dir", str(runs), "--json"]) == 0
    data = strict_loads(capsys.readouterr().out)
    assert data["schema"] == "clusterctl.explain/1"  # first, before the fields it versions
    assert data["verdict"]["code"] == "straggler"
    [found] = [d for d in data["diagnoses"] if d["code"] == "straggler"]
    assert found["node"] == "node2" and found["evidence"]["cpu_util"] == 1.0
    [starved] = [d for d in data["diagnoses"] if d["code"] == "cpu-starved"]
    assert starved["status"] == "found"
    assert [p["host"] for p in data["phases"]] == ["node1", "node2"]


def test_an_old_run_without_breakdown_says_what_is_missing(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(runs / OLD_RUN.name)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("unknown: the run recorded no per-step breakdown")
    assert "POP: unknown" in out


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: (d / RESULT_FILE).unlink(), "has no result.json"),
        (lambda d: (d / RESULT_FILE).write_text('{"run_id": '), "is no run record"),
    ],
    ids=["half-written", "garbled"],
)
def test_a_broken_run_directory_exits_2_naming_it(
    runs: Path, damage, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = runs / OLD_RUN.name
    damage(directory)
    assert main(["explain", str(directory)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Fix:" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["no-such-run"], []], ids=["unknown id", "no runs"])
def test_nothing_to_explain_exits_2(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", *args, "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Fix:" in err and "Traceback" not in err


def test_plot_draws_phases_and_telemetry(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "explain.png"
    assert main(["explain", "--runs-dir", str(runs), "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    bare = tmp_path / "bare.png"
    # an old run with no breakdown and no telemetry: nothing to draw
    assert main(["explain", str(runs / OLD_RUN.name), "--plot", str(bare)]) == 2
    assert "nothing to plot" in capsys.readouterr().err and not bare.exists()


def test_report_shows_each_row_s_verdict(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    rows = report_rows(capsys.readouterr().out)
    assert sorted(str(r["verdict"]) for r in rows) == ["None", "straggler"]
    assert main(["report", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "verdict" in out and "straggler" in out


@pytest.mark.parametrize("minutes", [-1, 1])
def test_a_row_s_verdict_is_its_explained_run_s_whichever_was_recorded_last(
    runs: Path, minutes: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # The verdicts are looked up by run id in one pass (not a scan per row): each row's verdict is what
    # `explain` says of the row's explained run (one with a breakdown), whatever order the runs were recorded in.
    straggler = load_runs(runs).runs[-1]
    when = straggler.started_at + timedelta(minutes=minutes)  # a balanced run of the same row
    balanced = breakdown_record(DDP).model_copy(
        update={"run_id": f"{when:%Y%m%dT%H%M%SZ}_resnet50_2n", "started_at": when}
    )
    record_run(runs, balanced)
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    rows = [r for r in report_rows(capsys.readouterr().out) if r["verdict"] is not None]
    assert rows  # rows whose explained run recorded no breakdown have no verdict
    for row in rows:
        assert main(["explain", row["explained_run"], "--runs-dir", str(runs), "--json"]) == 0
        assert row["verdict"] == strict_loads(capsys.readouterr().out)["verdict"]["code"]


def test_sweep_s_line_explains_its_least_efficient_multi_device_row(runs: Path) -> None:
    one = breakdown_record(THROTTLED[:1], nodes=1).model_copy(
        update={"run_id": "20261125T205900Z_resnet50_1n"}
    )
    record_run(runs, one)
    history = load_runs(runs)
    rows = build_report(history.runs, [])
    line = worst_row_line(rows, history.runs, history, runs)
    assert line is not None
    assert line.startswith("worst row (resnet50 on 2 devices, efficiency ")
    assert "run 20261125T210000Z_resnet50_2n): straggler: node2 computes" in line
    # only the rows of the given runs: the 1-device run alone has no multi-device row
    assert worst_row_line(rows, [one], history, runs) is None


def test_sweep_ends_with_its_worst_row_s_verdict(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's own path after the runs: the launch is left out (its runs are the fixtures')."""
    from clusterctl.results.record import read_record
    from clusterctl.results.report import report_of
    from clusterctl.run import conductor

    done = [(read_record(d), d) for d in sorted(runs.iterdir()) if (d / RESULT_FILE).is_file()]
    monkeypatch.setattr(conductor, "run_sweep", lambda context: (done, *report_of(context.runs_dir)))
    inventory = Path(__file__).resolve().parents[1] / "inventories" / "modern-h100.yml"
    argv = ["sweep", "resnet50", "-i", str(inventory), "--gpus", "2", "--runs-dir", str(runs)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table, worst = out.split("worst row (", 1)  # after the report's table, wrapped at 80 columns
    assert "clusterctl report" in table
    assert " ".join(worst.split()).startswith(
        "resnet50 on 2 devices, run 20261125T210000Z_resnet50_2n): straggler: node2 computes"
    )
