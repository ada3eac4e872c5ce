"""One run's facts, read the way `report` reads the history: the run directory's ``result.json``
(``load_runs``), the preflight's bus bandwidth from the report row the run falls in, and the nodes'
telemetry files beside it. Reads files only."""

from __future__ import annotations

from pathlib import Path

from clusterctl.errors import InputError
from clusterctl.explain.explanation import explain
from clusterctl.explain.model import RunFacts
from clusterctl.results.history import History, load_runs
from clusterctl.results.record import RESULT_FILE, RunRecord
from clusterctl.results.references import load_references
from clusterctl.results.report import ReportRow, build_report
from clusterctl.results.telemetry import load_telemetry


def _where(runs_dir: Path, run: str | None) -> tuple[Path, str | None]:
    """The runs directory and run id ``run`` names: a run directory (its parent and name), a run id under
    ``runs_dir``, or None (the latest run there)."""
    if run is None:
        return runs_dir, None
    given = Path(run)
    if given.is_dir() and given.parent != given:
        return given.resolve().parent, given.resolve().name
    if (runs_dir / run).is_dir():
        return runs_dir, run
    raise InputError(
        f"RUN {run!r} is neither a run directory nor a run id under --runs-dir {runs_dir}. Fix: pass a run "
        "directory `clusterctl run` wrote (runs/<UTC time>_<workload>_<nodes>n), its name with the "
        "--runs-dir it is in, or nothing for the latest run."
    )


def _pick(history: History, runs_dir: Path, name: str | None) -> RunRecord:
    """The run in the run directory ``name`` of ``history`` (None: its latest), or an InputError saying
    what is missing. A run is found by its directory, never by the run id its record says."""
    if name is None:
        if not history.runs:
            raise InputError(
                f"no runs recorded in {runs_dir}. Fix: `clusterctl run` records one there, or pass "
                "--runs-dir the directory your runs are in."
            )
        return history.runs[-1]
    record = history.record_in(name)
    if record is not None:
        return record
    directory = runs_dir / name
    if not (directory / RESULT_FILE).exists():
        raise InputError(
            f"{directory} has no {RESULT_FILE}: the run was interrupted before it was judged, or the "
            "directory is not a run directory. Fix: explain a finished run (`clusterctl report` lists them)."
        )
    why = next((line for line in history.skipped if line.startswith(str(directory / RESULT_FILE))), "")
    raise InputError(
        f"{directory / RESULT_FILE} is no run record ({why or 'unreadable'}): half-written or from "
        "another program. Fix: explain another run; `clusterctl report` names the records it leaves out."
    )


def _row(rows: list[ReportRow], record: RunRecord) -> ReportRow | None:
    """The report row ``record`` is one of: its configuration, world size and launcher."""
    return next(
        (r for r in rows
         if r.config == record.config and r.devices == record.world_size and r.launcher == record.launcher),
        None,
    )  # fmt: skip


def facts_of(record: RunRecord, run_dir: Path | None, rows: list[ReportRow]) -> RunFacts:
    """``record``'s facts: its telemetry in ``run_dir`` (None: no directory of it was read, no telemetry),
    and the preflight figures and the computation scalability's reference of its row in ``rows``."""
    row = _row(rows, record)
    predicted = row.predicted if row else None
    return RunFacts(
        record=record,
        telemetry=load_telemetry(run_dir) if run_dir is not None else {},
        bus_bandwidth_gb_s=predicted.bus_bandwidth_gb_s if predicted else None,
        allreduce_s=predicted.allreduce_s if predicted else None,
        reference=row.scaling_reference if row else None,
    )


def gather(runs_dir: Path, run: str | None) -> tuple[RunFacts, Path]:
    """The facts of run ``run`` (a run directory, a run id under ``runs_dir``, or None: the latest there)
    and its directory.

    Raises:
        InputError: no such run, a run directory without a readable record, or no runs at all.
    """
    runs_dir, name = _where(runs_dir, run)
    history = load_runs(runs_dir)
    record = _pick(history, runs_dir, name)
    run_dir = runs_dir / name if name is not None else history.run_dir(runs_dir, record)
    assert run_dir is not None  # the latest run is one of history's runs
    return facts_of(record, run_dir, build_report(history.runs, [])), run_dir


def _latest_explained(row: ReportRow, records: list[RunRecord]) -> RunRecord | None:
    """The row's latest valid run that recorded a breakdown."""
    mine = [r for r in records if r.valid and r.breakdown and _row([row], r) is row]
    return max(mine, key=lambda r: (r.started_at, r.run_id), default=None)


def _newer(a: RunRecord, b: RunRecord) -> bool:
    """Whether ``a`` is later than ``b`` as ``_latest_explained`` orders runs."""
    return (a.started_at, a.run_id) > (b.started_at, b.run_id)


def add_verdicts(rows: list[ReportRow], history: History, runs_dir: Path) -> None:
    """Set each row's ``verdict``: the verdict code of its latest valid run with a breakdown among
    ``history``'s runs (read from ``runs_dir``); rows without such a run keep None. The runs are gone
    through once, by the key the report groups them by (not once per row: 200 rows of 10,000 runs)."""
    newest: dict[tuple[str, int, str], RunRecord] = {}
    for r in history.runs:
        key = (r.config.model_dump_json(), r.world_size, r.launcher)
        if r.valid and r.breakdown and (key not in newest or _newer(r, newest[key])):
            newest[key] = r
    for row in rows:
        latest = newest.get((row.config.model_dump_json(), row.devices, row.launcher))
        if latest is not None:
            row.verdict = explain(facts_of(latest, history.run_dir(runs_dir, latest), rows)).verdict.code


def explained_report(runs_dir: Path) -> tuple[list[ReportRow], list[str]]:
    """``report_of`` with each row's verdict (``add_verdicts``).

    Raises:
        InputError: as ``load_runs``.
    """
    history = load_runs(runs_dir)
    rows = build_report(history.runs, load_references())
    add_verdicts(rows, history, runs_dir)
    return rows, history.skipped


def worst_row_line(
    rows: list[ReportRow], records: list[RunRecord], history: History, runs_dir: Path
) -> str | None:
    """One line explaining the least efficient multi-device row among ``records``' rows (by scaling
    efficiency, else POP parallel efficiency): which row, and its latest run's verdict (its telemetry
    from the directory ``history`` read it from, under ``runs_dir``); None when no such row has a run with
    a breakdown."""

    def efficiency(row: ReportRow) -> float:
        value = row.efficiency if row.efficiency is not None else row.parallel_efficiency
        return 2.0 if value is None else value

    candidates = [r for r in rows if r.devices > 1 and any(_row([r], x) is r for x in records)]
    for row in sorted(candidates, key=efficiency):
        latest = _latest_explained(row, records)
        if latest is not None:
            line = explain(facts_of(latest, history.run_dir(runs_dir, latest), rows)).verdict.line
            how = "" if row.efficiency is None else f", efficiency {100 * row.efficiency:.0f}%"
            return f"worst row ({row.config.workload} on {row.devices} devices{how}, run {latest.run_id}): {line}"
    return None
