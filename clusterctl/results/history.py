"""The run history: one SQLite row per run (``runs/history.sqlite``), the record kept as JSON.

Columns repeat the fields people filter on; ``record`` holds the whole ``RunRecord`` so a report
never needs the run directories. A history written before runs recorded their launcher gets the
``launcher`` column when the next run is added, ``ssh`` for its rows (the only launcher there was);
their records read as ssh too (``RunRecord.launcher``'s default).

Reading never changes the file (it is opened read-only: an old or read-only history reads as it is).
A row that does not hold a valid record is skipped and counted; a file SQLite cannot read is replaced,
for that read, by the run directories' ``result.json`` files (the source of truth), and rebuilt from
them by the next ``add_run``.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from clusterctl.errors import InputError
from clusterctl.results.record import RESULT_FILE, RunRecord

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


@dataclass
class History:
    """What reading a history gave: the runs, oldest first, and one line per row or file left out."""

    runs: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _insert(db: Path, record: RunRecord, run_dir: Path) -> None:
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


def add_run(db: Path, record: RunRecord, run_dir: Path) -> None:
    """Insert (or replace) the row for ``record``, whose files are in ``run_dir``.

    A history without the runs table (a new one) is first filled from the run directories beside it;
    one SQLite cannot read is set aside (``history.sqlite.corrupt-<UTC time>``) and rebuilt from them.
    """
    db.parent.mkdir(parents=True, exist_ok=True)
    try:
        with closing(sqlite3.connect(db)) as conn:
            known = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
            ).fetchone()
    except sqlite3.DatabaseError:
        db.rename(db.with_name(f"{db.name}.corrupt-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}"))
        known = None
    if known is None:
        for directory, old in _run_directories(db.parent).items():
            _insert(db, old, directory)
    _insert(db, record, run_dir)


def _run_directories(runs_dir: Path, skipped: list[str] | None = None) -> dict[Path, RunRecord]:
    """The record of every run directory under ``runs_dir`` (``*/result.json``); unreadable ones are
    named in ``skipped``."""
    found: dict[Path, RunRecord] = {}
    for result in sorted(runs_dir.glob(f"*/{RESULT_FILE}")):
        try:
            found[result.parent] = RunRecord.model_validate_json(result.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            if skipped is not None:
                skipped.append(f"{result}: {_first_line(exc)}")
    return found


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def read_history(db: Path) -> History:
    """Every run recorded in ``db`` that holds a valid record, oldest first, and what was left out.

    Opened read-only: nothing is migrated or written. No file: no runs.

    Raises:
        InputError: ``db``'s directory (the runs directory) exists and is not a directory, or ``db``
            exists and is not a regular file (a directory, a FIFO).
    """
    if db.parent.exists() and not db.parent.is_dir():
        raise InputError(
            f"{db.parent} is not a directory. Fix: pass --runs-dir the directory `clusterctl run` writes "
            "run directories and history.sqlite to (default: runs)."
        )
    if not db.exists():
        return History()
    if not db.is_file():
        raise InputError(
            f"{db}: the run history is not a regular file. Fix: move it away; `clusterctl run` writes a new "
            "history there."
        )
    history = History()
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT run_id, record FROM runs ORDER BY started_at, run_id").fetchall()
    except sqlite3.DatabaseError as exc:
        runs = _run_directories(db.parent, history.skipped)
        history.skipped.insert(
            0,
            f"{db} cannot be read ({_first_line(exc)}): read the {len(runs)} run directories beside it "
            "instead; the next `clusterctl run` rebuilds it from them",
        )
        history.runs = sorted(runs.values(), key=lambda r: (r.started_at.isoformat(), r.run_id))
        return history
    for run_id, text in rows:
        try:
            history.runs.append(RunRecord.model_validate_json(text))
        except (ValidationError, ValueError, TypeError) as exc:
            history.skipped.append(f"{db}: row {str(run_id)[:80]!r}: {_first_line(exc)}")
    return history


def load_runs(db: Path) -> list[RunRecord]:
    """Every readable run recorded in ``db``, oldest first (``read_history`` without what was left out)."""
    return read_history(db).runs
