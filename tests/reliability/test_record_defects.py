"""One bad record must not take a report down, and every --json output is strict JSON (issue 26, 5-6).

Records judged from figures that cannot be measurements (NaN, Infinity, zero or negative rates),
result.json files that are not records, history indexes that are not SQLite or not files, an old
history on a read-only path: each once crashed every `report` mode, divided by zero, or silently
entered a median. The nccl-tests outputs below are a real capture (tests/fixtures/nccl_tests/) with only the
bus bandwidth figures replaced, to make the broken figure each case is about.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterctl.cli import main
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.results.history import HISTORY_FILE, add_run, history_path, load_runs
from clusterctl.results.record import RESULT_FILE, RunRecord
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import plan_run
from clusterctl.run.rundir import new_run_dir, write_run_dir
from clusterctl.workloads import get_workload
from clusterctl.workloads.nccl_tests import LARGE_BUSBW
from tests.helpers.hostile import reproducible
from tests.helpers.rundirs import record_run
from tests.helpers.strictjson import report_rows, strict_loads

ROOT = Path(__file__).resolve().parents[2]
NCCL_TESTS = ROOT / "tests/fixtures/nccl_tests/oci-bm-gpu4-8-2node-16xa100-g8-all_reduce_perf-10G.txt"
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def sandbox() -> Inventory:
    return load_inventory(ROOT / "inventories" / "sandbox-example.yml")


def _result_line(inventory: Inventory, **figures: object) -> tuple[str, Any]:
    """A resnet50 run's plan and rank 0's CLUSTERCTL_RESULT line with ``figures`` (JSON text as given)."""
    plan = plan_run(inventory, "resnet50", nodes=1)
    s = plan.options.settings
    echo = {"model": "resnet50", "framework": s.framework, "batch_size": s.batch_size,
            "world_size": plan.world_size, "precision": s.precision}  # fmt: skip
    body = ", ".join(
        [*(f'"{k}": {json.dumps(v)}' for k, v in echo.items()), *(f'"{k}": {v}' for k, v in figures.items())]
    )
    return f"CLUSTERCTL_RESULT {{{body}}}\n", plan


def _judge(inventory: Inventory, run_id: str = "r1", **figures: object) -> RunRecord:
    log, plan = _result_line(inventory, **figures)
    return judge_run(inventory, plan, get_workload("resnet50"), log, 0, run_id=run_id, started_at=STARTED)


# --------------------------------------------------------------------------- figures


@pytest.mark.parametrize(
    ("figure", "kept"),
    [("NaN", False), ("Infinity", False), ("-Infinity", False), ("1e999", False), ("0", True), ("-5.0", True),
     ("0.0", True)],
)  # fmt: skip
def test_a_figure_that_is_no_measurement_makes_the_run_invalid_with_the_reason(
    sandbox: Inventory, figure: str, kept: bool
) -> None:
    record = _judge(sandbox, total_images_per_sec=figure, images_per_sec_per_device=1.0)
    assert not record.valid
    bad = [f for f in record.findings if f.code == "bad-figure"]
    assert bad and "total_images_per_sec" in bad[0].message
    assert ("total_images_per_sec" in record.metrics) is kept
    again = RunRecord.model_validate_json(record.model_dump_json())  # what history and result.json hold
    assert again == record
    rows = build_report(
        [record, _judge(sandbox, "r2", total_images_per_sec=5.0, images_per_sec_per_device=5.0)], []
    )
    assert [(r.runs, r.invalid_runs, r.median) for r in rows] == [(1, 1, 5.0)]


@pytest.mark.parametrize("figure", ['"fast"', "null", "true", "[1]", "1" + "0" * 400])
def test_a_figure_that_is_not_a_number_is_no_result(sandbox: Inventory, figure: str) -> None:
    record = _judge(sandbox, total_images_per_sec=figure, images_per_sec_per_device=1.0)
    assert not record.valid
    assert {f.code for f in record.findings} & {"no-result", "bad-figure"}


def _nccl_record(inventory: Inventory, busbw: str) -> RunRecord:
    text = NCCL_TESTS.read_text().replace("222.88", busbw).replace("220.921", busbw)
    plan = plan_run(inventory, "nccl-tests", nodes=2)
    return judge_run(inventory, plan, get_workload("nccl-tests"), text, 0, run_id="n", started_at=STARTED)


@pytest.mark.parametrize("busbw", ["0.00", "-1.5", "nan", "inf"])
def test_a_bus_bandwidth_of_zero_or_not_a_number_is_judged_invalid(busbw: str) -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    record = _nccl_record(inventory, busbw)
    assert not record.valid
    assert any(f.code == "bad-figure" and LARGE_BUSBW in f.message for f in record.findings)


def test_a_zero_busbw_in_an_old_valid_record_predicts_nothing_instead_of_dividing_by_zero(
    sandbox: Inventory,
) -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    collective = _nccl_record(inventory, "0.00").model_copy(update={"valid": True, "findings": []})
    one = _judge(inventory, "a", total_images_per_sec=1000.0, images_per_sec_per_device=1000.0)
    many = one.model_copy(
        update={"run_id": "b", "world_size": collective.world_size, "nodes": collective.nodes}
    )
    one, many = (r.model_copy(update={"valid": True, "gradient_bytes": 100_000_000}) for r in (one, many))
    rows = build_report([one, many, collective], load_references())
    assert all(r.predicted is None for r in rows)


# --------------------------------------------------------------------------- the history


def _history_with(tmp_path: Path, sandbox: Inventory) -> Path:
    """A runs directory whose history holds two good runs (1 and 1 device), with their directories."""
    runs = tmp_path / "runs"
    for run_id, value in (("good-1", 10.0), ("good-2", 12.0)):
        record = _judge(sandbox, run_id, total_images_per_sec=value, images_per_sec_per_device=value)
        record = record.model_copy(update={"valid": True, "findings": []})
        log, plan = _result_line(sandbox, total_images_per_sec=value, images_per_sec_per_device=value)
        directory = write_run_dir(new_run_dir(runs, run_id), sandbox, plan, log, record)
        add_run(history_path(runs), record, directory)
    return runs


BAD_RECORDS = {
    "not JSON": "{not json",
    "null": "null",
    "missing field": '{"run_id": "x"}',
    "unknown launcher": "LAUNCHER",
    "world size 0": "WORLD0",
}


def _add_bad_run_directories(runs: Path, good: RunRecord) -> None:
    """One run directory per ``BAD_RECORDS`` entry, its result.json holding that text (not indexed)."""
    for i, text in enumerate(BAD_RECORDS.values()):
        document = good.model_dump(mode="json")
        if text == "LAUNCHER":
            text = json.dumps({**document, "launcher": "pbs"})
        elif text == "WORLD0":
            text = json.dumps({**document, "world_size": 0})
        (runs / f"bad-{i}").mkdir()
        (runs / f"bad-{i}" / RESULT_FILE).write_text(text)


REPORT_MODES = [[], ["--json"], ["--wide"], ["--csv", "{tmp}/r.csv"], ["--plot", "{tmp}/r.png"]]


@pytest.mark.parametrize("mode", REPORT_MODES, ids=lambda m: " ".join(m) or "table")
def test_bad_records_are_skipped_and_counted_in_every_report_mode(
    tmp_path: Path, sandbox: Inventory, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    runs = _history_with(tmp_path, sandbox)
    _add_bad_run_directories(runs, load_runs(runs).runs[0])
    for rebuild in ([], ["--rebuild-index"]):  # the index stale (it lacks them), then indexing them too
        argv = ["report", "--runs-dir", str(runs), *rebuild, *(a.format(tmp=tmp_path) for a in mode)]
        capsys.readouterr()
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert "5 history entries left out of the report" in " ".join(err.split())
        assert "Traceback" not in err and "internal error" not in err
        if "--json" in mode:
            [row] = report_rows(out)
            assert row["runs"] == 2
        assert len(load_runs(runs).skipped) == 5 and len(load_runs(runs).runs) == 2
    assert load_runs(runs).index == "current"


def test_reading_never_writes_not_even_an_old_history(tmp_path: Path, sandbox: Inventory) -> None:
    runs = _history_with(tmp_path, sandbox)
    db = history_path(runs)
    good = load_runs(runs).runs
    with closing(sqlite3.connect(db)) as conn, conn:  # as an older clusterctl left it (another format)
        conn.execute("PRAGMA user_version = 0")
        conn.execute("ALTER TABLE runs ADD COLUMN record TEXT")
    before = db.read_bytes()
    listing = sorted(runs.rglob("*"))
    os.chmod(db, 0o444)
    assert load_runs(runs).runs == good
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    assert db.read_bytes() == before, "the read path changed the index"
    assert sorted(runs.rglob("*")) == listing, "the read path wrote beside the run directories"


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty tables"])
def test_a_damaged_index_is_read_around_and_rebuilt_by_the_next_run(
    tmp_path: Path, sandbox: Inventory, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    runs = _history_with(tmp_path, sandbox)
    db = history_path(runs)
    data = db.read_bytes()
    if damage == "truncated":
        db.write_bytes(data[:150])
    elif damage == "garbage":
        db.write_bytes(b"\x00not a database\xff" * 64)
    else:
        db.unlink()
        sqlite3.connect(db).close()  # a SQLite file without the runs table
    damaged = db.read_bytes()
    history = load_runs(runs)
    assert sorted(r.run_id for r in history.runs) == ["good-1", "good-2"]
    unreadable = damage != "empty tables"  # an empty SQLite file is only an index older than the runs
    assert history.index == ("unreadable" if unreadable else "stale")
    assert ("cannot be read" in history.skipped[0]) if unreadable else history.skipped == []
    capsys.readouterr()
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    out, err = capsys.readouterr()
    assert report_rows(out)[0]["runs"] == 2 and ("cannot be read" in err) == unreadable
    later = _judge(sandbox, "later", total_images_per_sec=11.0, images_per_sec_per_device=11.0)
    add_run(
        db, later, write_run_dir(new_run_dir(runs, "later"), sandbox, _result_line(sandbox)[1], "", later)
    )
    rebuilt = load_runs(runs)
    assert rebuilt.skipped == [] and sorted(r.run_id for r in rebuilt.runs) == ["good-1", "good-2", "later"]
    assert rebuilt.index == "current"
    [kept] = runs.glob(f"{HISTORY_FILE}.{'corrupt' if unreadable else 'old'}-*")  # set aside, not deleted
    assert kept.read_bytes() == damaged


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_history_that_is_not_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    db = history_path(tmp_path)
    db.mkdir() if kind == "directory" else os.mkfifo(db)
    assert main(["report", "--runs-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "history.sqlite" in err and "not a regular file" in err and "Fix:" in err


def test_a_runs_dir_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs").write_text("x")
    assert main(["report", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "is not a directory" in " ".join(capsys.readouterr().err.split())


# --------------------------------------------------------------------------- strict JSON


def test_report_json_writes_an_overflowed_figure_as_null_and_says_so(
    tmp_path: Path, sandbox: Inventory, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    for run_id in ("a", "b"):  # the median of two finite extremes overflows to Infinity
        record = _judge(sandbox, run_id, total_images_per_sec=1.7e308, images_per_sec_per_device=1.7e308)
        record_run(runs, record.model_copy(update={"valid": True, "findings": []}))
    capsys.readouterr()
    assert main(["report", "--runs-dir", str(runs), "--json"]) == 0
    out, err = capsys.readouterr()
    [row] = report_rows(out)
    assert row["median"] is None and "not finite" in err and "median" in err
    # The plot leaves the overflowed row out: nothing is left to draw, said plainly (no axis-limit crash).
    assert main(["report", "--runs-dir", str(runs), "--plot", str(tmp_path / "p.png")]) == 2
    assert "nothing to plot" in capsys.readouterr().err


def test_inspect_json_is_strict_for_a_nan_bus_bandwidth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nccl.txt"
    path.write_text(NCCL_TESTS.read_text().replace("222.88", "nan").replace("220.921", "inf"))
    # `# Avg bus bandwidth : inf` is no figure: the output has no result, an error (exit 1), not a crash.
    assert main(["inspect", str(path), "--json"]) == 1
    out, err = capsys.readouterr()
    [result] = strict_loads(out)
    assert [f["code"] for f in result["findings"]] == ["nccl-tests-no-result"]
    assert result["parsed"]["peak_bus_bandwidth_gb_per_s"] is None  # the nan busbw, written as null ...
    assert "peak_bus_bandwidth_gb_per_s was nan" in err  # ... and said so


json_value = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return isinstance(value, list) and any(_has_non_finite(v) for v in value)


@reproducible(300)
@given(json_value)
def test_print_json_is_strict_for_any_value(capsys: pytest.CaptureFixture[str], value: Any) -> None:
    from clusterctl.cli.common import print_json

    capsys.readouterr()
    print_json(value)
    out, err = capsys.readouterr()
    parsed = strict_loads(out)
    assert ("not finite" in err) == _has_non_finite(value)
    if not _has_non_finite(value):
        assert parsed == value


@reproducible(150)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**30), 10**400))
def test_any_figure_is_judged_valid_only_when_a_positive_finite_rate(
    sandbox: Inventory, figure: float
) -> None:
    record = _judge(sandbox, total_images_per_sec=json.dumps(figure), images_per_sec_per_device=1.0)
    try:
        good = math.isfinite(float(figure)) and float(figure) > 0
    except OverflowError:  # an integer beyond float's range
        good = False
    assert any(f.code == "bad-figure" for f in record.findings) is not good
    assert record.valid is (good and record.valid)
    kept = RunRecord.model_validate_json(record.model_dump_json())
    assert kept == record
    assert all(math.isfinite(m.value) for m in kept.metrics.values())
    rows = build_report([kept], [])
    assert [r.runs for r in rows] == [1 if record.valid else 0]


@pytest.fixture(scope="module")
def history_runs(tmp_path_factory: pytest.TempPathFactory, sandbox: Inventory) -> Path:
    """A real two-run runs directory, its index current: the index and a result.json to damage."""
    return _history_with(tmp_path_factory.mktemp("history"), sandbox)


def _damaged(original: bytes, data: st.DataObject, what: str) -> bytes:
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8), label=f"{what} edits")):
        at = data.draw(st.integers(0, len(damaged) - 1), label="at")
        damaged[at] = data.draw(st.integers(0, 255), label="byte")
    return bytes(damaged[: data.draw(st.integers(0, len(damaged)), label=f"{what} cut")])


@reproducible(150)
@given(st.data())
def test_any_damage_to_the_index_or_a_record_reads_without_a_crash(
    tmp_path_factory: pytest.TempPathFactory, history_runs: Path, data: st.DataObject
) -> None:
    runs = tmp_path_factory.mktemp("damaged") / "runs"
    shutil.copytree(history_runs, runs)
    db, result = history_path(runs), runs / "good-1" / RESULT_FILE
    db.write_bytes(_damaged(db.read_bytes(), data, "index"))
    if data.draw(st.booleans(), label="damage a record too"):
        result.write_bytes(_damaged(result.read_bytes(), data, "record"))
    history = load_runs(runs)  # a damaged index changes nothing; a damaged record is read or left out
    assert "good-2" in [r.run_id for r in history.runs] and len(history.runs) + len(history.skipped) >= 2
    assert all(
        r.world_size >= 1 and all(math.isfinite(m.value) for m in r.metrics.values()) for r in history.runs
    )
