"""The history: each run directory's result.json is the record; history.sqlite only indexes them, is
kept in step by each run (``add_run``) and ``rebuild_index``, and can never make a read disagree with
the run directories."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterctl.results.history import HISTORY_FILE, add_run, history_path, load_runs, rebuild_index
from clusterctl.results.record import RESULT_FILE, RunRecord
from tests.helpers.records import record
from tests.helpers.rundirs import record_run


def _runs(tmp_path: Path, *records: RunRecord) -> Path:
    runs = tmp_path / "runs"
    for r in records:
        record_run(runs, r)
    return runs


def _later(run_id: str, value: float, day: int) -> RunRecord:
    return record(run_id, 1, value).model_copy(update={"started_at": datetime(2026, 2, day, tzinfo=UTC)})


def _index_rows(runs: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(history_path(runs))) as conn:
        return conn.execute("SELECT run_dir, run_id, value, error FROM runs ORDER BY run_dir").fetchall()


def test_history_keeps_every_run_in_order(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert load_runs(runs).runs == []
    record_run(runs, _later("b", 2.0, 2))
    record_run(runs, _later("a", 1.0, 3))
    history = load_runs(runs)
    assert [r.run_id for r in history.runs] == ["b", "a"]  # by start time, not by name
    assert history.index == "current" and history.skipped == []
    assert _index_rows(runs) == [("a", "a", 1.0, None), ("b", "b", 2.0, None)]


def test_a_run_directory_the_index_lacks_is_read_and_the_next_run_indexes_it(tmp_path: Path) -> None:
    runs = _runs(tmp_path, _later("a", 1.0, 1))
    copied = runs / "b"  # e.g. copied in from another machine, or its run died before add_run
    copied.mkdir()
    (copied / RESULT_FILE).write_text(_later("b", 2.0, 2).model_dump_json())
    history = load_runs(runs)
    assert [r.run_id for r in history.runs] == ["a", "b"] and history.index == "stale"
    record_run(runs, _later("c", 3.0, 3))
    assert load_runs(runs).index == "current"
    assert [row[0] for row in _index_rows(runs)] == ["a", "b", "c"]


def test_a_deleted_run_directory_is_no_longer_a_run(tmp_path: Path) -> None:
    runs = _runs(tmp_path, _later("a", 1.0, 1), _later("b", 2.0, 2))
    (runs / "b" / RESULT_FILE).unlink()
    (runs / "b").rmdir()
    history = load_runs(runs)
    assert [r.run_id for r in history.runs] == ["a"]
    assert history.skipped == [] and history.index == "stale"
    assert rebuild_index(runs) == 1 and load_runs(runs).index == "current"


def test_a_rewritten_result_json_is_read_as_it_is_now(tmp_path: Path) -> None:
    runs = _runs(tmp_path, _later("a", 1.0, 1))
    rejudged = _later("a", 12.5, 1).model_dump_json(indent=2) + "\n"  # judged again: another file
    (runs / "a" / RESULT_FILE).write_text(rejudged)
    history = load_runs(runs)
    assert [r.value for r in history.runs] == [12.5] and history.index == "stale"
    rebuild_index(runs)
    assert _index_rows(runs) == [("a", "a", 12.5, None)] and load_runs(runs).index == "current"


def test_a_result_json_that_is_no_record_is_skipped_counted_and_indexed_with_why(tmp_path: Path) -> None:
    runs = _runs(tmp_path, _later("a", 1.0, 1))
    (runs / "bad").mkdir()
    (runs / "bad" / RESULT_FILE).write_text('{"run_id": "bad"}')
    (runs / "odd" / RESULT_FILE).mkdir(parents=True)  # not a regular file: never opened
    history = load_runs(runs)
    assert [r.run_id for r in history.runs] == ["a"]
    assert len(history.skipped) == 2 and "not a regular file" in " ".join(history.skipped)
    assert rebuild_index(runs) == 3
    rows = {row[0]: row for row in _index_rows(runs)}
    assert rows["bad"][1] is None and "validation error" in str(rows["bad"][3])
    assert rows["odd"][3] == "not a regular file"
    assert load_runs(runs).index == "current"  # the bad ones are indexed too: no rebuild on every run


def test_a_record_from_before_launchers_reads_as_ssh_and_an_old_history_is_set_aside(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    old = record("old", 1, 1.0).model_dump(mode="json")
    del old["launcher"]  # a result.json written before the field existed
    (runs / "old").mkdir(parents=True)
    (runs / "old" / RESULT_FILE).write_text(json.dumps(old))
    # The history of that time: the records inside.
    with closing(sqlite3.connect(history_path(runs))) as conn, conn:
        conn.execute(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, record TEXT NOT NULL)"
        )
        conn.execute("INSERT INTO runs VALUES ('old', ?, ?)", (str(runs / "old"), json.dumps(old)))
    before = history_path(runs).read_bytes()
    history = load_runs(runs)
    assert [(r.run_id, r.launcher) for r in history.runs] == [("old", "ssh")] and history.index == "stale"
    assert history_path(runs).read_bytes() == before, "reading changed the old history"
    record_run(runs, record("new", 1, 2.0).model_copy(update={"launcher": "slurm"}))
    assert sorted((r.run_id, r.launcher) for r in load_runs(runs).runs) == [("new", "slurm"), ("old", "ssh")]
    [kept] = runs.glob(f"{HISTORY_FILE}.old-*")
    assert kept.read_bytes() == before


def test_rebuilding_without_a_runs_directory_writes_nothing(tmp_path: Path) -> None:
    assert rebuild_index(tmp_path / "runs") == 0
    assert not (tmp_path / "runs").exists()


def test_a_run_directory_outside_the_runs_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "a"
    elsewhere.mkdir(parents=True)
    with pytest.raises(ValueError, match="is not a run directory of"):
        add_run(history_path(tmp_path / "runs"), record("a", 1, 1.0), elsewhere)
