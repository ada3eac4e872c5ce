"""The run history: one SQLite row per run (``runs/history.sqlite``), the record kept as JSON.

Columns repeat the fields people filter on; ``record`` holds the whole ``RunRecord`` so a report
never needs the run directories.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from clusterctl.results.record import RunRecord

HISTORY_FILE = "history.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    workload TEXT NOT NULL,
    model TEXT NOT NULL,
    framework TEXT NOT NULL,
    precision TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    device TEXT NOT NULL,
    nodes INTEGER NOT NULL,
    world_size INTEGER NOT NULL,
    valid INTEGER NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    run_dir TEXT NOT NULL,
    record TEXT NOT NULL
)
"""


def history_path(runs_dir: Path) -> Path:
    """Where the history of ``runs_dir`` lives."""
    return runs_dir / HISTORY_FILE


def add_run(db: Path, record: RunRecord, run_dir: Path) -> None:
    """Insert (or replace) the row for ``record``, whose files are in ``run_dir``."""
    db.parent.mkdir(parents=True, exist_ok=True)
    c = record.config
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(_SCHEMA)
        conn.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.run_id,
                record.started_at.isoformat(),
                c.workload,
                c.model,
                c.framework,
                c.precision,
                c.batch_size,
                c.device,
                record.nodes,
                record.world_size,
                int(record.valid),
                record.primary_metric,
                record.value,
                str(run_dir),
                record.model_dump_json(),
            ),
        )


def load_runs(db: Path) -> list[RunRecord]:
    """Every recorded run, oldest first; empty when there is no history yet."""
    if not db.is_file():
        return []
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(_SCHEMA)
        rows = conn.execute("SELECT record FROM runs ORDER BY started_at, run_id").fetchall()
    return [RunRecord.model_validate_json(row[0]) for row in rows]
