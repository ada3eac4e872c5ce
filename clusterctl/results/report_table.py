"""The report as a table for a terminal: which columns fit the width, and what each cell says.

Workload, devices, median, speedup and efficiency are always shown whole; the other columns are added in
rank order while the table's natural width fits, the ones left out are named under it, and reference
verdicts that did not fit are listed there. Rich is imported on use (the CLI's start-up loads none of it);
every cell goes through ``safe_text``: a record may hold any character.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.results.report import ReportRow
from clusterctl.results.step import limit_of
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _model(row: ReportRow) -> str:
    """The model, with a gpt run's size and sequence length (``gpt 124m/1024``, ``ckpt`` when its
    activations were checkpointed)."""
    c = row.config
    if c.model_size is None:
        return c.model
    return f"{c.model} {c.model_size}/{c.seq_len}" + (" ckpt" if c.activation_checkpointing else "")


def _references(row: ReportRow) -> str:
    return "; ".join(f"{x.metric} {x.observed:.2f} vs {x.expected:g} [{x.verdict}]" for x in row.comparisons)


def _predicted(row: ReportRow) -> str:
    """The predicted range (no overlap - full overlap), where the median lands, and the message size
    the bus bandwidth was read at; 'allreduce < compute' when the whole exchange fits inside the compute
    (a fact of the model, not a cause: the cause is the verdict's)."""
    p = row.predicted
    if p is None:
        return "-"
    at = f" at {p.fused_bytes / 2**20:g} MiB" if p.fused_bytes else " at max size"
    verdict = f" [{row.prediction_verdict}]" if row.prediction_verdict else ""
    bound = "; allreduce < compute" if p.compute_bound else ""
    return f"{p.no_overlap:,.1f}-{p.full_overlap:,.1f} {row.unit}{at}{verdict}{bound}"


def _vs_predicted(row: ReportRow) -> str:
    """Measured / predicted: against full overlap - against none (1.00 and above: as good as the model)."""
    p = row.predicted
    if p is None or row.median is None:
        return "-"
    return f"{row.median / p.full_overlap:.2f}-{row.median / p.no_overlap:.2f}"


def _fabric(row: ReportRow) -> str:
    """GB each node's fabric sent (median run), with the rail balance on multi-rail nodes."""
    if row.fabric_gb_per_node is None:
        return "-"
    balance = "" if row.rail_balance is None else f" bal {row.rail_balance:.2f}"
    return f"{row.fabric_gb_per_node:.2f} GB/node{balance}"


def _pop(row: ReportRow) -> str:
    """POP parallel efficiency = load balance x communication efficiency (medians of the row's runs)."""
    if row.parallel_efficiency is None or row.load_balance is None or row.communication_efficiency is None:
        return "-"
    return f"{row.parallel_efficiency:.2f}={row.load_balance:.2f}x{row.communication_efficiency:.2f}"


def _global(row: ReportRow) -> str:
    """POP global efficiency = parallel efficiency x computation scalability (against the configuration's
    smallest row)."""
    ge, pe, cs = row.global_efficiency, row.parallel_efficiency, row.computation_scalability
    return "-" if ge is None or pe is None or cs is None else f"{ge:.2f}={pe:.2f}x{cs:.2f}"


def _mfu(row: ReportRow) -> str:
    """Achieved TFLOP/s and, where the peak is known, the model FLOPs utilisation (MFU)."""
    if row.achieved_tflops is None:
        return "-"
    share = "" if row.mfu is None else f" {100 * row.mfu:.1f}%"
    return f"{row.achieved_tflops:,.3g} TF/s{share}"


def amount(value: float) -> str:
    """A throughput in words: whole numbers from 100 up (``4,420``), else three significant digits (a
    sandbox's 1.7 img/s must not read as 2)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def step_story(row: ReportRow) -> tuple[str | None, str | None]:
    """The row's verdict code and its cause in words: the limit that verdict names
    (``clusterctl.results.step.LIMITS``) and what `explain` found, e.g. ("compute-scaling", "the compute
    is the limit, not the fabric: computation scalability 0.75: each rank computes 1.3x as long per step
    as on 1 device"). (None, None) for a row `explain` gave no verdict (no breakdown, or not explained);
    the code and no cause for ``unknown``. The report's sentence and the HTML page both say this.
    """
    limit = limit_of(row.verdict)
    if limit is None:
        return row.verdict, None
    found = (row.verdict_line or "").partition(": ")[2]
    return row.verdict, f"{limit}: {found}" if found else limit


_WHERE = {
    "within": "within the range {what} predict",
    "below": "below the range {what} predict: time that neither accounts for (waiting on a slower rank, "
    "input, overheads)",
    "above": "above the range {what} predict: the collective was measured slower than the workload's own "
    "exchange ran (measure it again with the same settings)",
}


def meaning(row: ReportRow) -> str | None:
    """What a multi-device row means in one sentence: its speedup and efficiency (with POP's parallel
    efficiency and computation scalability where they are known); `explain`'s verdict on its middle run
    as the limit it names (``step_story``); that run's step (``StepModel``: compute, the exchange and
    how much of it was exposed, input); and where the median lands against the range that step and the
    measured collective predict. None for a 1-device row or one without a speedup."""
    if row.devices < 2 or row.speedup is None or row.efficiency is None or row.median is None:
        return None
    pop = ""
    ge, pe, cs = row.global_efficiency, row.parallel_efficiency, row.computation_scalability
    if ge is not None and pe is not None and cs is not None:
        pop = f" (POP: parallel {pe:.2f} x computation scalability {cs:.2f} = {ge:.2f})"
    words = [
        f"{row.workload_label} on {row.devices} devices: {row.speedup:.2f}x, "
        f"{100 * row.efficiency:.0f}% efficiency{pop}"
    ]
    code, cause = step_story(row)
    if cause:
        words.append(f"{code}, {cause}")
    step, p = row.step, row.predicted
    if step is not None and (p is not None or step.compute_source == "breakdown"):
        which = f"run {step.run_id}" if step.run_id else "the step"
        if step.run_id and row.runs > 1:
            which += f" (the middle of {row.runs} by {row.unit})"
        words.append(f"{which}, per step: {step.figures()}")
    if p is None:
        words.append(
            f"no collective measured at {row.devices} devices, so nothing says what this cluster should give "
            "(`clusterctl run allreduce` or `--preflight` measures it)"
        )
    else:
        what = (
            "its compute and the measured collective"
            if p.compute_source == "breakdown"
            else ("the 1-device compute and the measured collective")
        )
        where = _WHERE[p.verdict(row.median)].format(what=what)
        words.append(
            f"{amount(row.median)} {row.unit} is {where} ({amount(p.no_overlap)}-{amount(p.full_overlap)} "
            f"{row.unit})"
        )
    return "; ".join(words) + "."


def _input(row: ReportRow) -> str:
    """The input pipeline's own rate, and whether training waited on it."""
    if row.loader_images_per_sec is None:
        return "-"
    verdict = {True: " [input-bound]", False: " [keeps up]", None: ""}[row.input_bound]
    return f"{row.loader_images_per_sec:,.1f} {row.unit}{verdict}"


def _cold_warm(row: ReportRow) -> str:
    """The first epoch's rate beside the later epochs' median, and whether the first read from storage."""
    if row.cold_images_per_sec is None:
        return "-"
    warm = _fmt(row.warm_images_per_sec, ",.1f")
    return f"{row.cold_images_per_sec:,.1f}/{warm}" + (" [dropped]" if row.cache_dropped else "")


@dataclass(frozen=True)
class _Column:
    """One column of the report table: its header, its cell, and whether it must be shown."""

    header: str
    cell: Callable[[ReportRow], str]
    # None: always shown (the five that say what the report is for: which workload, on how many devices,
    # how fast, how well it scaled). The others are added in increasing rank while the table fits.
    rank: int | None
    right: bool = False
    # A column only some runs can fill (predictions, counters): when no row has a value, it is left out
    # to fit the width without being named (nothing is lost).
    sparse: bool = False
    # What a sparse column's cell says when the row has nothing for it.
    empty: str = "-"


_COLUMNS: tuple[_Column, ...] = (
    # The launcher beside the workload, so that an ssh row and its slurm twin never read as duplicates.
    _Column("workload", lambda r: r.workload_label, None),
    _Column("model", lambda r: _model(r), 8),
    _Column("framework", lambda r: r.config.framework, 6),
    _Column("precision", lambda r: r.config.precision, 2),
    _Column("batch", lambda r: str(r.config.batch_size), 3, right=True),
    _Column("device", lambda r: r.config.device, 7),
    # Ranked first of the optional ones: a real-data row and its loader-only twin differ only here.
    _Column("data", lambda r: r.config.data, -1, sparse=True, empty="synthetic"),
    _Column("devices", lambda r: str(r.devices), None, right=True),
    _Column("nodes", lambda r: ",".join(map(str, r.nodes)), 1, right=True),
    _Column("runs", lambda r: f"{r.runs}" + (f" (+{r.invalid_runs} invalid)" if r.invalid_runs else ""), 4),
    # A collective's small bus bandwidth (0.016 GB/s on the sandbox) keeps three digits, never 0.0.
    _Column(
        "median",
        lambda r: f"{_fmt(r.median, ',.1f' if (r.median or 0) >= 1 else '.3g')} {r.unit}",
        None,
        right=True,
    ),
    _Column("spread", lambda r: f"{_fmt(r.spread_pct, '.1f')}%", 5, right=True),
    _Column("speedup", lambda r: "-" if r.speedup is None else f"{r.speedup:.2f}x", None, right=True),
    _Column(
        "efficiency",
        lambda r: "-" if r.efficiency is None else f"{100 * r.efficiency:.1f}%",
        None,
        right=True,
    ),
    _Column("meas/pred", _vs_predicted, 0, right=True, sparse=True),
    _Column("predicted", _predicted, 10, right=True, sparse=True),
    _Column("PE=LBxCE", _pop, 13, right=True, sparse=True),
    _Column("GE=PExCS", _global, 13, right=True, sparse=True),
    _Column("mfu", _mfu, 14, right=True, sparse=True),
    _Column("input", _input, 15, right=True, sparse=True),
    _Column(
        "time-to-target",
        lambda r: _fmt(r.time_to_target_s, ",.1f") + (" s" if r.time_to_target_s else ""),
        16,
        right=True,
        sparse=True,
    ),
    _Column("cold/warm", _cold_warm, 17, right=True, sparse=True),
    _Column("fabric", _fabric, 11, right=True, sparse=True),
    _Column("nccl algo", lambda r: ", ".join(r.algorithms) or "-", 12, sparse=True),
    _Column("reference", lambda r: _references(r) or "-", 9),
    # explain's verdict code: ranked with meas/pred (the why beside the how far), after it.
    _Column("verdict", lambda r: r.verdict or "-", 0, sparse=True),
)


def report_cells(rows: list[ReportRow]) -> tuple[list[str], list[list[str]]]:
    """Every column some row fills: the headers and each row's cells as text (the HTML report's table)."""
    shown = [c for c in _COLUMNS if not (c.sparse and all(c.cell(r) == "-" for r in rows))]
    return [c.header for c in shown], [[c.cell(row) for c in shown] for row in rows]


def _table(rows: list[ReportRow], columns: list[_Column]) -> Table:
    """The table of ``columns`` (kept in their display order) for ``rows``."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # No vertical rules: 14 columns of borders would cost 15 characters of an 80-column line.
    table = Table(
        title="clusterctl report", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    shown = [c for c in _COLUMNS if c in columns]
    for column in shown:
        table.add_column(column.header, justify="right" if column.right else "left", overflow="fold")
    for row in rows:
        # Text, not markup: a verdict such as "[pass]" is data, not a style.
        table.add_row(*(Text(safe_text(column.cell(row))) for column in shown))
    return table


def _natural_width(table: Table) -> int:
    from rich.console import Console

    return Console(width=10_000).measure(table).maximum


def report_table(rows: list[ReportRow], width: int | None) -> tuple[Table, list[str]]:
    """The report table with the columns that fit ``width`` (None: all), and the headers left out.

    Workload, devices, median, speedup and efficiency are always there; the other columns are added
    in rank order, each one only if the table's natural width still fits. A sparse column no row
    fills is neither added nor named.
    """
    if width is None:
        return _table(rows, list(_COLUMNS)), []
    wanted = [c for c in _COLUMNS if not (c.sparse and all(c.cell(r) == c.empty for r in rows))]
    columns = [c for c in wanted if c.rank is None]
    for candidate in sorted((c for c in wanted if c.rank is not None), key=lambda c: c.rank or 0):
        if _natural_width(_table(rows, [*columns, candidate])) <= width:
            columns.append(candidate)
    return _table(rows, columns), [c.header for c in wanted if c not in columns]


def print_report(rows: list[ReportRow], out: Console, *, wide: bool = False) -> None:
    """Print the report table on ``out``: the columns that fit its width, or every column when ``wide``.

    Left-out columns are named under the table; left-out reference verdicts are listed there, one
    line per row that has any. Those lines wrap at the console's width (soft wrap off).
    """
    from rich.console import Console

    table, left_out = report_table(rows, None if wide else out.width)
    if wide:
        out = Console(width=max(out.width, _natural_width(table)), file=out.file, soft_wrap=True)
    out.print(table)
    for row in rows:
        if sentence := meaning(row):
            out.print(safe_text(sentence), markup=False, highlight=False, soft_wrap=False)
    if not left_out:
        return
    if "reference" in left_out:
        for row in rows:
            if row.comparisons:
                out.print(safe_text(f"reference: {row.config.workload} on {row.devices} devices: {_references(row)}"),
                          markup=False, highlight=False, soft_wrap=False)  # fmt: skip
    out.print(f"left out to fit {out.width} columns: {', '.join(left_out)} (--wide shows every column)",
              highlight=False, soft_wrap=False)  # fmt: skip
