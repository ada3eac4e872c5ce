"""Run directories for the tests of the history and the report: what the conductor leaves behind for a
record (its ``result.json``, indexed), without judging a log."""

from __future__ import annotations

from pathlib import Path

from clusterctl.results.history import add_run, history_path
from clusterctl.results.record import RESULT_FILE, RunRecord


def record_run(runs_dir: Path, record: RunRecord) -> Path:
    """Write ``record`` as the result.json of run directory ``runs_dir/<run_id>``, index it, and return
    the directory."""
    directory = runs_dir / record.run_id
    directory.mkdir(parents=True)
    (directory / RESULT_FILE).write_text(record.model_dump_json(indent=2) + "\n")
    add_run(history_path(runs_dir), record, directory)
    return directory
