"""One run's facts, read the way `report` reads the history: the run directory's ``result.json``
(``load_runs``), the preflight's bus bandwidth from the report row the run falls in, and the nodes'
telemetry files beside it. Reads files only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from clusterctl.errors import InputError
from clusterctl.explain.explanation import explain
from clusterctl.explain.model import PeerRun, RunFacts
from clusterctl.results.history import History, load_runs
from clusterctl.results.html import Explained
from clusterctl.results.record import RESULT_FILE, RunRecord
from clusterctl.results.references import load_references
from clusterctl.results.report import ReportRow, build_report
from clusterctl.results.report_table import step_story
from clusterctl.results.telemetry import load_telemetry

# Which run of a configuration the page explains, in words: the same as the report row's verdict.
EXPLAINED_RUN = (
    "the middle valid run of this configuration by throughput (of those with a per-step breakdown), "
    "the run the table's verdict is about"
)


def _where(runs_dir: Path, run: str | None) -> tuple[Path, str | None]:
    """The runs directory and run id ``run`` names: a run directory (its parent and name), a run id under
    ``runs_dir``, or None (explain chooses: ``_choose``)."""
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


def _choose(history: History, rows: list[ReportRow], latest: bool) -> tuple[RunRecord, str]:
    """The run explain explains when none is named, and a line saying which and why: the middle run of
    the latest run's configuration (its report row's ``explained_run``, the run the report's verdict
    column and sentence are about), or with ``latest`` the latest run. ``history`` holds a run."""
    last = history.runs[-1]
    row = _row(rows, last)
    middle = next((r for r in history.runs if row is not None and r.run_id == row.explained_run), None)
    if latest or row is None or middle is None:
        why = "the latest run" + (
            " (--latest)" if latest else " (its configuration has no valid run to choose the middle of)"
        )
        return last, f"explaining {last.run_id}: {why}; `explain RUN` explains another"
    what = f"{row.config.workload} on {row.devices} device{'s' if row.devices > 1 else ''}"
    if row.runs == 1:
        return middle, (
            f"explaining {middle.run_id}: the one valid run of the latest configuration ({what}); "
            "`explain RUN` explains another"
        )
    low, high = row.minimum or 0.0, row.maximum or 0.0
    return middle, (
        f"explaining {middle.run_id}: the middle by {row.unit} of the {row.runs} valid runs of the latest "
        f"configuration ({what}: {low:,.3g} to {high:,.3g} {row.unit}), the run the report's verdict is "
        "about; `explain --latest` explains the latest run, `explain RUN` any other"
    )


def _pick(history: History, runs_dir: Path, name: str | None) -> RunRecord:
    """The run in the run directory ``name`` of ``history``, or an InputError saying what is missing.
    A run is found by its directory, never by the run id its record says."""
    if name is None:  # and no run to choose from
        raise InputError(
            f"no runs recorded in {runs_dir}. Fix: `clusterctl run` records one there, or pass "
            "--runs-dir the directory your runs are in."
        )
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


def facts_of(
    record: RunRecord, run_dir: Path | None, rows: list[ReportRow], peers: Sequence[PeerRun] = ()
) -> RunFacts:
    """``record``'s facts: its telemetry in ``run_dir`` (None: no directory of it was read, no telemetry),
    the preflight figures and the computation scalability's reference of its row in ``rows``, and the
    runs of its configuration ``peers`` (``peers_of``)."""
    row = _row(rows, record)
    predicted = row.predicted if row else None
    return RunFacts(
        record=record,
        telemetry=load_telemetry(run_dir) if run_dir is not None else {},
        bus_bandwidth_gb_s=predicted.bus_bandwidth_gb_s if predicted else None,
        allreduce_s=predicted.allreduce_s if predicted else None,
        reference=row.scaling_reference if row else None,
        peers=tuple(peers),
    )


def peers_of(record: RunRecord, history: History, runs_dir: Path) -> list[PeerRun]:
    """The valid runs with a number of ``record``'s configuration (its report row) among ``history``'s,
    itself included; the slowest's and the fastest's with their telemetry (what run-to-run compares)."""
    mine = [
        r for r in history.runs
        if r.valid and r.value is not None and r.config == record.config and r.world_size == record.world_size
        and r.launcher == record.launcher
    ]  # fmt: skip
    ends = {min(mine, key=lambda r: r.value or 0.0).run_id, max(mine, key=lambda r: r.value or 0.0).run_id}
    return [
        PeerRun(r, load_telemetry(d) if r.run_id in ends and (d := history.run_dir(runs_dir, r)) else {})
        for r in mine
    ] if mine else []  # fmt: skip


def gather(runs_dir: Path, run: str | None, *, latest: bool = False) -> tuple[RunFacts, Path]:
    """The facts of run ``run`` (a run directory, a run id under ``runs_dir``, or None: the middle run of
    the latest configuration there, or with ``latest`` the latest run: ``_choose``) and its directory.

    Raises:
        InputError: no such run, a run directory without a readable record, or no runs at all.
    """
    runs_dir, name = _where(runs_dir, run)
    history = load_runs(runs_dir)
    rows = build_report(history.runs, [])
    selection = None
    if name is None and history.runs:
        record, selection = _choose(history, rows, latest)
    else:
        record = _pick(history, runs_dir, name)
    run_dir = runs_dir / name if name is not None else history.run_dir(runs_dir, record)
    assert run_dir is not None  # a chosen run is one of history's runs
    facts = facts_of(record, run_dir, rows, peers_of(record, history, runs_dir))
    return replace(facts, selection=selection), run_dir


def _by_id(records: list[RunRecord]) -> dict[str, RunRecord]:
    """``records`` by run id, for ``_explained``."""
    return {r.run_id: r for r in records}


def _explained(row: ReportRow, by_id: dict[str, RunRecord]) -> RunRecord | None:
    """The row's ``explained_run`` (among runs by id, ``_by_id``) when it recorded a breakdown (a run
    without one has no verdict to give)."""
    run = by_id.get(row.explained_run) if row.explained_run is not None else None
    return run if run is not None and run.breakdown and _row([row], run) is row else None


def add_verdicts(rows: list[ReportRow], history: History, runs_dir: Path) -> None:
    """Set each row's ``verdict`` and ``verdict_line``: `explain`'s verdict on the row's explained run
    (the middle of its runs, the one its step and sentence are about) among ``history``'s runs (read
    from ``runs_dir``); rows whose run recorded no breakdown keep None. The runs are indexed once (not
    gone through once per row: 200 rows of 10,000 runs)."""
    by_id = _by_id(history.runs)
    for row in rows:
        run = _explained(row, by_id)
        if run is not None:
            verdict = explain(facts_of(run, history.run_dir(runs_dir, run), rows)).verdict
            row.verdict, row.verdict_line = verdict.code, verdict.line


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
    efficiency, else POP parallel efficiency): which row, and its explained run's verdict (its telemetry
    from the directory ``history`` read it from, under ``runs_dir``); None when no such row has a run with
    a breakdown."""

    def efficiency(row: ReportRow) -> float:
        value = row.efficiency if row.efficiency is not None else row.parallel_efficiency
        return 2.0 if value is None else value

    candidates = [r for r in rows if r.devices > 1 and any(_row([r], x) is r for x in records)]
    by_id = _by_id(history.runs)
    for row in sorted(candidates, key=efficiency):
        run = _explained(row, by_id)
        if run is not None:
            line = explain(facts_of(run, history.run_dir(runs_dir, run), rows)).verdict.line
            how = "" if row.efficiency is None else f", efficiency {100 * row.efficiency:.0f}%"
            return (
                f"worst row ({row.config.workload} on {row.devices} devices{how}, run {run.run_id}): {line}"
            )
    return None


def page_explanations(rows: list[ReportRow], history: History, runs_dir: Path) -> list[Explained]:
    """Why each row ran as it did, for `report --html` (``results.html`` cannot import explain): each
    row's explained run (the one its verdict column and sentence are about), its verdict and cause in
    the report's words (``step_story``), phases per node, findings, and the POP, scaling and MFU lines."""
    from clusterctl.explain.render import mfu_line, pop_line, scaling_line

    explained = []
    by_id = _by_id(history.runs)
    for row in rows:
        run = _explained(row, by_id)
        if run is None:
            continue
        e = explain(facts_of(run, history.run_dir(runs_dir, run), rows))
        verdict, cause = step_story(row)
        explained.append(
            Explained(
                row=row,
                run_id=e.run_id,
                picked=EXPLAINED_RUN,
                verdict=verdict or e.verdict.code,
                line=f"{verdict}: {cause}" if verdict and cause else e.verdict.line,
                nodes=e.phases,
                answers=e.diagnoses,
                lines=[pop_line(e), scaling_line(e), mfu_line(e)],
            )
        )
    return explained
