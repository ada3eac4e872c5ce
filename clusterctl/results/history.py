"""The run history: the run directories' ``result.json`` files, and an index of them (``history.sqlite``).

``result.json`` in each run directory is the one record of a run. ``history.sqlite`` beside the run
directories is only an index, made from them: one row per run directory that holds a ``result.json``
(its name, the size and modification time of the ``result.json`` it was made from, and the columns people
filter on, or why the file is no record). Nothing in it is read as a record, so the index and the run
directories can never disagree about a run.

``load_runs`` is how the history is read: the run directories are listed; when the index names exactly
those, at the same size and time, it is current and gives the order to read them in; otherwise (no index,
an index older than the run directories, one SQLite cannot read, one an older clusterctl wrote with the
records inside) the run directories are read as they are. Either way every record comes from its
``result.json``; a run directory whose ``result.json`` is no record is skipped and counted. Reading never
writes: the index is rebuilt by the next ``add_run`` (the conductor, after each run) when it is not current
for the other runs, and on request (``rebuild_index``: `clusterctl report --rebuild-index`). A file that is
not a current index is set aside when the index is rebuilt, never deleted (``history.sqlite.corrupt-<UTC
time>`` when SQLite cannot read it, ``history.sqlite.old-<UTC time>`` otherwise: an older history holds
records).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import tempfile
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from clusterctl.errors import InputError
from clusterctl.results.record import RESULT_FILE, RunRecord, read_record_bytes

HISTORY_FILE = "history.sqlite"

# The index's format, in SQLite's user_version; a file with another one is not a current index.
INDEX_VERSION = 2

_SCHEMA = """
CREATE TABLE runs (
    run_dir TEXT PRIMARY KEY,
    result_size INTEGER,
    result_mtime_ns INTEGER,
    run_id TEXT,
    started_at TEXT,
    workload TEXT,
    model TEXT,
    framework TEXT,
    precision TEXT,
    batch_size INTEGER,
    device TEXT,
    launcher TEXT,
    nodes INTEGER,
    world_size INTEGER,
    valid INTEGER,
    metric TEXT,
    value REAL,
    error TEXT
)
"""
_COLUMNS = (
    "run_dir, result_size, result_mtime_ns, run_id, started_at, workload, model, framework, precision, "
    "batch_size, device, launcher, nodes, world_size, valid, metric, value, error"
)
_INSERT = f"INSERT OR REPLACE INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * len(_COLUMNS.split(',')))})"

Stamp = tuple[int, int]
"""A ``result.json``'s size and modification time (ns): which version of it an index row was made from."""

IndexState = Literal["current", "missing", "stale", "unreadable"]


def history_path(runs_dir: Path) -> Path:
    """Where the index of ``runs_dir``'s run directories lives."""
    return runs_dir / HISTORY_FILE


@dataclass
class History:
    """What reading a runs directory gave: the runs, oldest first; one line per run directory (or index)
    left out; whether the index was current; where each run was read from; and the copies.

    A run is found by its directory, never by the ``run_id`` its record says: a renamed run directory is
    still its run, and a record cannot point at another directory. Two directories holding one run (the
    same ``run_id``: a copy, e.g. ``cp -r``) give one run, read from the directory named after it (else
    the first by name); the other is a copy, counted once and named in ``skipped``.
    """

    runs: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    index: IndexState = "missing"
    directories: dict[str, str] = field(default_factory=dict)
    """Run id → the name of the run directory its record was read from."""
    copies: dict[str, str] = field(default_factory=dict)
    """Name of a run directory that copies another → the run id it holds."""

    def run_dir(self, runs_dir: Path, record: RunRecord) -> Path | None:
        """The run directory ``record`` was read from, under ``runs_dir``; None when it is none of these runs."""
        name = self.directories.get(record.run_id)
        return None if name is None else runs_dir / name

    def record_in(self, name: str) -> RunRecord | None:
        """The run read from, or copied into, the run directory ``name``; None when no record came from it."""
        run_id = self.copies.get(name) or next((r for r, d in self.directories.items() if d == name), None)
        return next((r for r in self.runs if r.run_id == run_id), None)


@dataclass(frozen=True)
class _Index:
    """An index file as read: its rows (run directory name to stamp, in the index's order) when it is a
    current index; or why not."""

    state: Literal["current-format", "missing", "older", "unreadable"]
    rows: dict[str, Stamp | None] = field(default_factory=dict)
    problem: str = ""


def _check(runs_dir: Path) -> None:
    """Raise InputError when ``runs_dir`` or its index is something else than a directory and a file."""
    if runs_dir.exists() and not runs_dir.is_dir():
        raise InputError(
            f"{runs_dir} is not a directory. Fix: pass --runs-dir the directory `clusterctl run` writes "
            "run directories and history.sqlite to (default: runs)."
        )
    db = history_path(runs_dir)
    if db.exists() and not db.is_file():
        raise InputError(
            f"{db}: the run history's index is not a regular file. Fix: move it away; `clusterctl report "
            "--rebuild-index` or the next `clusterctl run` writes a new one there."
        )


def _run_directories(runs_dir: Path) -> dict[str, tuple[Path, Stamp | None]]:
    """Every run directory under ``runs_dir`` (one holding a ``result.json``), by name: the file and its
    stamp (None: it is no regular file, or vanished while listed)."""
    found: dict[str, tuple[Path, Stamp | None]] = {}
    for result in sorted(runs_dir.glob(f"*/{RESULT_FILE}")):
        try:
            info = result.stat()
            stamp = (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None
        except OSError:
            stamp = None
        found[result.parent.name] = (result, stamp)
    return found


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _read_record(result: Path, stamp: Stamp | None) -> RunRecord:
    """The record in ``result`` (a run directory's result.json), read through ``read_capped``: a regular
    file only (a FIFO or device is never opened to block), of at most ``record.MAX_RECORD_BYTES``.

    Raises:
        ValueError: it is not a regular file, is too large, or holds no valid record (a ValidationError).
        OSError: it cannot be read.
    """
    if stamp is None:
        raise ValueError("not a regular file")
    return RunRecord.model_validate_json(read_record_bytes(result))


def _read_index(db: Path) -> _Index:
    """The index file ``db`` as it is, opened read-only: nothing is migrated or written."""
    if not db.exists():
        return _Index("missing")
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version != INDEX_VERSION:
                return _Index("older")
            rows = conn.execute(
                "SELECT run_dir, result_size, result_mtime_ns FROM runs ORDER BY started_at, run_dir"
            ).fetchall()
    except sqlite3.Error as exc:
        return _Index("unreadable", problem=_first_line(exc))
    return _Index(
        "current-format",
        {str(name): None if size is None else (size, mtime) for name, size, mtime in rows},
    )


def _current(index: _Index, found: dict[str, tuple[Path, Stamp | None]], *, but: str = "") -> bool:
    """Whether ``index`` names exactly the run directories ``found``, at the stamps found (``but`` one)."""
    if index.state != "current-format":
        return False
    indexed = {name: stamp for name, stamp in index.rows.items() if name != but}
    return indexed == {name: stamp for name, (_, stamp) in found.items() if name != but}


def load_runs(runs_dir: Path) -> History:
    """Every run recorded in ``runs_dir`` (each run directory's ``result.json``), oldest first; the run
    directories left out (no valid record) and, when SQLite cannot read it, the index; and the index's
    state. Read-only: nothing is written. No directory: no runs.

    Raises:
        InputError: ``runs_dir`` exists and is not a directory, or its index exists and is not a regular
            file (a directory, a FIFO).
    """
    _check(runs_dir)
    history = History()
    if not runs_dir.exists():
        return history
    db = history_path(runs_dir)
    index = _read_index(db)
    found = _run_directories(runs_dir)
    if _current(index, found):
        history.index = "current"
        names: Iterable[str] = index.rows  # the same directories, in the index's order
    else:
        history.index = "missing" if index.state == "missing" else "stale"
        names = found
    if index.state == "unreadable":
        history.index = "unreadable"
        history.skipped.append(
            f"{db} cannot be read ({index.problem}): read the {len(found)} run directories beside it "
            "instead; `clusterctl report --rebuild-index` or the next `clusterctl run` rebuilds it"
        )
    read: dict[str, list[tuple[str, RunRecord]]] = {}
    for name in names:
        result, stamp = found[name]
        try:
            record = _read_record(result, stamp)
        except (OSError, ValueError) as exc:
            history.skipped.append(f"{result}: {_first_line(exc)}")
            continue
        read.setdefault(record.run_id, []).append((name, record))
    for run_id, where in read.items():
        name, record = next(((n, r) for n, r in where if n == run_id), min(where, key=lambda w: w[0]))
        history.runs.append(record)
        history.directories[run_id] = name
        for other, _ in where:
            if other != name:
                history.copies[other] = run_id
                history.skipped.append(
                    f"{runs_dir / other}: a copy of run {run_id} (read from {runs_dir / name}), counted once"
                )
    history.runs.sort(key=lambda r: (r.started_at.isoformat(), r.run_id))
    return history


def _row(name: str, result: Path, stamp: Stamp | None) -> tuple[object, ...]:
    """The index row of run directory ``name``, made from its ``result`` (``stamp``: as listed)."""
    record, error = None, None
    try:
        record = _read_record(result, stamp)
    except (OSError, ValueError) as exc:
        error = _first_line(exc)
    if record is None or stamp is None:
        return (name, *(stamp or (None, None)), *([None] * 14), error)
    c = record.config
    return (
        name,
        *stamp,
        record.run_id,
        record.started_at.isoformat(),
        c.workload,
        c.model,
        c.framework,
        c.precision,
        c.batch_size,
        c.device,
        record.launcher,
        record.nodes,
        record.world_size,
        int(record.valid),
        record.primary_metric,
        record.value,
        None,
    )


def _set_aside(db: Path, index: _Index) -> None:
    """Rename ``db``, a file that is no current index, beside itself (it may hold what only it holds)."""
    if index.state in ("older", "unreadable"):
        reason = "corrupt" if index.state == "unreadable" else "old"
        db.rename(db.with_name(f"{db.name}.{reason}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}"))


def rebuild_index(runs_dir: Path) -> int:
    """Write ``runs_dir``'s index anew from its run directories and return how many it indexes.

    The new index is written beside the old one and renamed over it, so a reader sees one or the other;
    a file that was no current index is set aside first. No runs directory: nothing is written.

    Raises:
        InputError: as ``load_runs``.
        OSError: the index cannot be written there (no permission, a full disk: SQLite's error too).
    """
    _check(runs_dir)
    if not runs_dir.exists():
        return 0
    db = history_path(runs_dir)
    rows = [_row(name, result, stamp) for name, (result, stamp) in _run_directories(runs_dir).items()]
    handle, temporary = tempfile.mkstemp(prefix=f"{HISTORY_FILE}.", suffix=".new", dir=runs_dir)
    os.close(handle)
    try:
        with closing(sqlite3.connect(temporary)) as conn, conn:
            conn.execute(_SCHEMA)
            conn.executemany(_INSERT, rows)
            conn.execute(f"PRAGMA user_version = {INDEX_VERSION}")
        _set_aside(db, _read_index(db))
        os.replace(temporary, db)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, sqlite3.Error):
            raise OSError(errno.EIO, f"SQLite: {_first_line(exc)}") from exc
        raise
    return len(rows)


def add_run(db: Path, record: RunRecord, run_dir: Path) -> None:
    """Index the run directory ``run_dir`` (inside ``db``'s runs directory), whose ``result.json`` holds
    ``record``.

    The row is made from the ``result.json`` itself (``record`` is what the conductor just wrote there), so
    the index never says what the file does not. An index that is not current for the other run
    directories (none yet, older than them, unreadable) is rebuilt from all of them instead.

    Raises:
        ValueError: ``run_dir`` is not inside ``db``'s directory.
        OSError: ``run_dir`` has no readable ``result.json``.
    """
    runs_dir = db.parent
    if run_dir.parent.resolve() != runs_dir.resolve():
        raise ValueError(f"run {record.run_id}: {run_dir} is not a run directory of {runs_dir}")
    result = run_dir / RESULT_FILE
    info = result.stat()
    found = _run_directories(runs_dir)
    if not _current(_read_index(db), found, but=run_dir.name):
        rebuild_index(runs_dir)
        return
    row = _row(run_dir.name, result, (info.st_size, info.st_mtime_ns))
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(_INSERT, row)
