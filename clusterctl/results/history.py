"""The run history: one SQLite row per run (``runs/history.sqlite``), the record kept as JSON.

Columns repeat the fields people filter on; ``record`` holds the whole ``RunRecord`` so a report
never needs the run directories. A history written before runs recorded their launcher gets the
``launcher`` column on first use, ``ssh`` for its rows (the only launcher there was); their records
read as ssh too (``RunRecord.launcher``'s default).
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
    record TEXT NOT NULL,
    launcher TEXT NOT NULL DEFAULT 'ssh'
)
"""
_COLUMNS = (
    "run_id, started_at, workload, model, framework, precision, batch_size, device, nodes, world_size, "
    "valid, metric, value, run_dir, record, launcher"
)


def history_path(runs_dir: Path) -> Path:
    """Where the history of ``runs_dir`` lives."""
    return runs_dir / HISTORY_FILE


def _open(db: Path) -> sqlite3.Connection:
    """A connection to ``db`` with the current schema (an older table gains its missing column)."""
    conn = sqlite3.connect(db)
    conn.execute(_SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "launcher" not in columns:
        with conn:
            conn.execute("ALTER TABLE runs ADD COLUMN launcher TEXT NOT NULL DEFAULT 'ssh'")
    return conn


def add_run(db: Path, record: RunRecord, run_dir: Path) -> None:
    """Insert (or replace) the row for ``record``, whose files are in ``run_dir``."""
    db.parent.mkdir(parents=True, exist_ok=True)
    c = record.config
    with closing(_open(db)) as conn, conn:
        conn.execute(
            f"INSERT OR REPLACE INTO runs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                record.launcher,
            ),
        )


def load_runs(db: Path) -> list[RunRecord]:
    """Every recorded run, oldest first; empty when there is no history yet."""
    if not db.is_file():
        return []
    with closing(_open(db)) as conn:
        rows = conn.execute("SELECT record FROM runs ORDER BY started_at, run_id").fetchall()
    return [RunRecord.model_validate_json(row[0]) for row in rows]
