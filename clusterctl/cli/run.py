"""`clusterctl run`, `report` and `sweep`: launch a workload, report the history, run a grid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    output_file,
    positive_int,
    print_json,
    safe_text,
    split_option,
    warn,
    writing,
)
from clusterctl.workloads import NAMES

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from clusterctl.results.counters import CounterExpectation, CounterProof, NodeTraffic
    from clusterctl.results.record import RunRecord
    from clusterctl.results.report import ReportRow
    from clusterctl.run.context import RunContext
    from clusterctl.run.plan import LaunchPlan
    from clusterctl.workloads.base import Workload

RunsDirOption = typer.Option(Path("runs"), "--runs-dir", help="Where run directories and history.sqlite go.")
JsonOption = typer.Option(False, "--json", help="Machine-readable output on stdout.")
TimeoutOption = typer.Option(
    3600.0, "--timeout", min=1, callback=finite_seconds, help="Seconds one run may take before it is killed."
)
RepeatsOption = typer.Option(1, "--repeats", min=1, help="Run K times; report the median and spread.")
DryRunOption = typer.Option(False, "--dry-run", help="Print the mpirun command and stop.")
LauncherOption = typer.Option(
    None,
    "--launcher",
    help="ssh (mpirun in the primary's container) or slurm (sbatch + srun on the login node); default: "
    "slurm when the inventory's slurm block says default: true, else ssh. With --dry-run, slurm prints the "
    "batch script.",
)


def _line_printer(as_json: bool) -> Callable[[str], None]:
    out = err_console if as_json else console
    return lambda line: out.print(safe_text(line), markup=False, highlight=False)


def _record_printer(as_json: bool) -> Callable[[RunRecord, Path], None]:
    """Print each recorded run as it finishes; with --json, print nothing (the summary says it all)."""
    return (lambda record, directory: None) if as_json else _print_record


def _print_record(record: RunRecord, directory: Path) -> None:
    status = "[green]valid[/]" if record.valid else "[bold red]invalid[/]"
    value = (
        f"{record.value:,.2f} {record.metrics[record.primary_metric].unit}" if record.value else "no result"
    )
    console.print(
        f"{status} {record.run_id}: {record.primary_metric} {value}; fabric {record.fabric.transport}"
        f"{' GDRDMA' if record.fabric.gdr else ''}; run directory {directory}",
        highlight=False,
    )
    if record.fabric.algorithms:
        console.print(
            f"  nccl algorithm/protocol: {record.fabric.algorithm_words}", markup=False, highlight=False
        )
    if record.counters is not None:
        console.print(_counters_line(record.counters), markup=False, highlight=False)
    for finding in record.findings:
        colour = "red" if finding.severity == "error" else "yellow"
        console.print(f"  [{colour}]{finding.severity}[/] {finding.code}: {finding.message}", highlight=False)


def _counters_line(proof: CounterProof) -> str:
    """``  counters (eth0): node1 1.02/1.02 GB, ... sent/received; floor 0.92 GB per node (ring/tree)``;
    with RDMA judged, each node's IPoIB share after its totals."""

    def moved(t: NodeTraffic) -> str:
        if t.error:
            return "unknown"
        ipoib = f" (IPoIB {t.ipoib_sent / 1e9:.2f}/{t.ipoib_received / 1e9:.2f})" if t.ipoib else ""
        return f"{t.sent / 1e9:.2f}/{t.received / 1e9:.2f} GB{ipoib}"

    nodes = ", ".join(f"{name} {moved(t)}" for name, t in proof.nodes.items())
    floor = proof.floor_bytes_per_node
    judged = " RDMA" if proof.rdma_only else ""
    return f"  counters ({proof.fabric}): {nodes} sent/received" + (
        f"; floor{judged} {floor / 1e9:.2f} GB per node ({proof.bound})" if floor else ""
    )


def _summary(records: list[RunRecord]) -> dict[str, object]:
    import statistics

    values = [r.value for r in records if r.valid and r.value is not None]
    return {
        "runs": [r.model_dump(mode="json") for r in records],
        "median": statistics.median(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "valid": all(r.valid for r in records),
    }


def run(
    workload: str = typer.Argument(..., help=f"One of: {', '.join(NAMES)}."),
    inventory: Path | None = InventoryOption,
    nodes: int | None = typer.Option(
        None, "--nodes", min=1, help="Primary plus N-1 secondaries (default: all)."
    ),
    ranks_per_node: int | None = typer.Option(
        None, "--ranks-per-node", min=1, max=256, help="Default: GPUs per node (1 on CPU); at most 256."
    ),
    framework: str | None = typer.Option(None, "--framework", help="horovod or ddp."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Per device."),
    precision: str | None = typer.Option(None, "--precision", help="fp32, fp16 or bf16."),
    channels_last: bool | None = typer.Option(None, "--channels-last/--channels-first", help="NHWC / NCHW."),
    xla: bool | None = typer.Option(None, "--xla/--no-xla", help="XLA (TensorFlow) or torch.compile."),
    steps: int | None = typer.Option(None, "--steps", help="Measured steps."),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", help="Steps before measuring."),
    image_size: int | None = typer.Option(None, "--image-size", help="Synthetic image side in pixels."),
    repeats: int = RepeatsOption,
    timeout: float = TimeoutOption,
    dry_run: bool = DryRunOption,
    preflight: bool = typer.Option(
        False,
        "--preflight",
        help="First measure the fabric's allreduce bus bandwidth (nccl-tests on GPUs, allreduce on CPUs); "
        "exit 1 without running WORKLOAD when it is below the inventory's preflight.min_bus_bandwidth_gb_s.",
    ),
    launcher: str | None = LauncherOption,
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
) -> int:
    """Run WORKLOAD across the cluster (mpirun over SSH, or through Slurm); record and judge it."""
    from clusterctl.run.context import run_context
    from clusterctl.run.plan import plan_run
    from clusterctl.run.runner import run_plans

    inv = load(inventory)
    data_format = None if channels_last is None else ("NHWC" if channels_last else "NCHW")
    plan = plan_run(
        inv,
        workload,
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        framework=framework,
        batch_size=batch_size,
        precision=precision,
        data_format=data_format,
        xla=xla,
        steps=steps,
        warmup_steps=warmup_steps,
        image_size=image_size,
    )
    context = run_context(
        inv,
        [plan],
        launcher=launcher,
        runs_dir=runs_dir,
        timeout_s=timeout,
        repeats=repeats,
        preflight=preflight,
        on_line=_line_printer(as_json),
        on_record=_record_printer(as_json),
    )
    if dry_run:  # with --preflight, the collective's command first, as it would run
        _print_dry_run(context, as_json)
        return 0
    done = run_plans(context)
    summary = _summary([record for record, _ in done])
    if as_json:
        print_json(summary)
    elif repeats > 1 and summary["median"] is not None:
        console.print(
            f"median of {repeats}: {summary['median']:,.2f} (min {summary['min']:,.2f}, max {summary['max']:,.2f})"
        )
    return 0 if summary["valid"] else 1


def _print_dry_run(context: RunContext, as_json: bool) -> None:
    """What the launcher would run for each plan, in order: the mpirun command, or (slurm) the batch
    script, and (on stderr, so the command still pastes exactly; in --json, beside it) the bytes per
    node the proof by counters will expect."""
    launcher, in_order = context.launcher, context.in_order()
    plans = [plan for plan, _ in in_order]
    expectations = [_expectation(plan, workload) for plan, workload in in_order]
    if launcher.name == "ssh":
        _print_plans(plans, expectations, as_json)
        return
    scripts = [launcher.describe(context.inventory, plan) for plan in plans]
    if as_json:
        print_json(
            [
                {"launcher": launcher.name, "script": script, "counters": _dumped(expected)}
                for script, expected in zip(scripts, expectations, strict=True)
            ]
        )
        return
    for script, expected in zip(scripts, expectations, strict=True):
        _say_expectation(expected)
        print(script, end="")  # plain: the script must paste exactly


def _expectation(plan: LaunchPlan, workload: Workload) -> CounterExpectation | None:
    from clusterctl.results.counters import counter_expectation

    volume = workload.allreduce_volume(plan.options.settings)
    return None if volume is None else counter_expectation(volume.bytes, volume.derivation, len(plan.hosts))


def _dumped(expected: CounterExpectation | None) -> dict[str, object] | None:
    return None if expected is None else expected.model_dump(mode="json")


def _say_expectation(expected: CounterExpectation | None) -> None:
    if expected is not None:
        err_console.print(expected.words(), markup=False, highlight=False)


def _print_plans(
    plans: list[LaunchPlan], expectations: list[CounterExpectation | None], as_json: bool
) -> None:
    if as_json:
        print_json(
            [
                {"argv": p.argv, "env": p.env, "command": p.shell_command(), "counters": _dumped(e)}
                for p, e in zip(plans, expectations, strict=True)
            ]
        )
        return
    for plan, expected in zip(plans, expectations, strict=True):
        _say_expectation(expected)
        # Plain print: the command must paste exactly, without rich wrapping or markup.
        print(plan.shell_command())


def report(
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
    csv_file: Path | None = typer.Option(None, "--csv", help="Also write the report as CSV to FILE."),
    plot_file: Path | None = typer.Option(
        None, "--plot", help="Also write the scaling figure (PNG) to FILE."
    ),
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every column, however wide (by default columns are left out to fit the terminal).",
    ),
) -> int:
    """Per configuration: devices, img/s median and spread, speedup, efficiency, references."""
    from clusterctl.results.history import history_path
    from clusterctl.results.report import report_csv, report_of

    csv_file = output_file(csv_file, "--csv") if csv_file else None
    plot_file = output_file(plot_file, "--plot", suffix=".png") if plot_file else None
    rows, skipped = report_of(runs_dir)
    _warn_skipped(skipped)
    if csv_file:
        with writing(csv_file, "--csv"):
            csv_file.write_text(report_csv(rows))
    if plot_file:
        from clusterctl.results.plot import plot_report  # matplotlib: imported only when a plot is asked for

        with writing(plot_file, "--plot"):
            plot_report(rows, plot_file)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
    elif not rows:
        console.print(f"no runs recorded in {history_path(runs_dir)} yet; `clusterctl run` records them")
    else:
        print_report(rows, console, wide=wide)
    return 0


def _warn_skipped(skipped: list[str]) -> None:
    """One warning naming the history rows (or the file) the report left out, at most five of them."""
    if skipped:
        more = f"; and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        warn(f"{len(skipped)} history entries left out of the report: {'; '.join(skipped[:5])}{more}")


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _references(row: ReportRow) -> str:
    return "; ".join(f"{x.metric} {x.observed:.2f} vs {x.expected:g} [{x.verdict}]" for x in row.comparisons)


def _predicted(row: ReportRow) -> str:
    """The predicted range (no overlap - full overlap), where the median lands, and the message size
    the bus bandwidth was read at; 'compute-bound' when the fabric is not the limit."""
    p = row.predicted
    if p is None:
        return "-"
    at = f" at {p.fused_bytes / 2**20:g} MiB" if p.fused_bytes else " at max size"
    verdict = f" [{row.prediction_verdict}]" if row.prediction_verdict else ""
    bound = "; compute-bound: the fabric is not the limit" if p.compute_bound else ""
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


_COLUMNS: tuple[_Column, ...] = (
    # The launcher beside the workload, so that an ssh row and its slurm twin never read as duplicates.
    _Column(
        "workload", lambda r: r.config.workload + ("" if r.launcher == "ssh" else f" via {r.launcher}"), None
    ),
    _Column("model", lambda r: r.config.model, 8),
    _Column("framework", lambda r: r.config.framework, 6),
    _Column("precision", lambda r: r.config.precision, 2),
    _Column("batch", lambda r: str(r.config.batch_size), 3, right=True),
    _Column("device", lambda r: r.config.device, 7),
    _Column("devices", lambda r: str(r.devices), None, right=True),
    _Column("nodes", lambda r: ",".join(map(str, r.nodes)), 1, right=True),
    _Column("runs", lambda r: f"{r.runs}" + (f" (+{r.invalid_runs} invalid)" if r.invalid_runs else ""), 4),
    _Column("median", lambda r: f"{_fmt(r.median, ',.1f')} {r.unit}", None, right=True),
    _Column("spread", lambda r: f"{_fmt(r.spread_pct, '.1f')}%", 5, right=True),
    _Column("speedup", lambda r: _fmt(r.speedup, ".2f") + "x", None, right=True),
    _Column(
        "efficiency",
        lambda r: _fmt(None if r.efficiency is None else 100 * r.efficiency, ".1f") + "%",
        None,
        right=True,
    ),
    _Column("meas/pred", _vs_predicted, 0, right=True, sparse=True),
    _Column("predicted", _predicted, 10, right=True, sparse=True),
    _Column("fabric", _fabric, 11, right=True, sparse=True),
    _Column("nccl algo", lambda r: ", ".join(r.algorithms) or "-", 12, sparse=True),
    _Column("reference", lambda r: _references(r) or "-", 9),
)


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
    wanted = [c for c in _COLUMNS if not (c.sparse and all(c.cell(r) == "-" for r in rows))]
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
    if not left_out:
        return
    if "reference" in left_out:
        for row in rows:
            if row.comparisons:
                out.print(safe_text(f"reference: {row.config.workload} on {row.devices} devices: {_references(row)}"),
                          markup=False, highlight=False, soft_wrap=False)  # fmt: skip
    out.print(f"left out to fit {out.width} columns: {', '.join(left_out)} (--wide shows every column)",
              highlight=False, soft_wrap=False)  # fmt: skip


def sweep(
    workload: str = typer.Argument("resnet50", help=f"One of: {', '.join(NAMES)}."),
    inventory: Path | None = InventoryOption,
    gpus: str = typer.Option("1", "--gpus", help="Device counts, comma-separated, e.g. 1,4,8."),
    batch_size: str | None = typer.Option(None, "--batch-size", help="Batch sizes per device, e.g. 128,256."),
    precision: str | None = typer.Option(None, "--precision", help="Precisions, e.g. fp16,fp32."),
    framework: str | None = typer.Option(None, "--framework", help="Frameworks, e.g. horovod,ddp."),
    steps: int | None = typer.Option(None, "--steps", help="Measured steps for every run."),
    image_size: int | None = typer.Option(None, "--image-size", help="Image size for every run."),
    repeats: int = RepeatsOption,
    timeout: float = TimeoutOption,
    dry_run: bool = DryRunOption,
    launcher: str | None = LauncherOption,
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
) -> int:
    """Run the grid (device counts x settings), then report it."""
    from clusterctl.run.context import run_context
    from clusterctl.run.runner import run_sweep
    from clusterctl.run.sweep import plan_sweep

    devices = split_option(gpus, "--gpus", positive_int, "a whole number of at least 1")
    grid: dict[str, list[object]] = {}
    if batch_size is not None:
        grid["batch_size"] = split_option(
            batch_size, "--batch-size", positive_int, "a whole number of at least 1"
        )
    for name, option, values in (
        ("precision", "--precision", precision),
        ("framework", "--framework", framework),
    ):
        if values is not None:
            grid[name] = split_option(values, option, str, "a name")
    grid |= {
        name: [value] for name, value in (("steps", steps), ("image_size", image_size)) if value is not None
    }
    inv = load(inventory)
    plans = plan_sweep(inv, workload, devices, grid)
    context = run_context(
        inv,
        plans,
        launcher=launcher,
        runs_dir=runs_dir,
        timeout_s=timeout,
        repeats=repeats,
        on_line=_line_printer(as_json),
        on_record=_record_printer(as_json),
    )
    if dry_run:
        _print_dry_run(context, as_json)
        return 0
    done, rows, skipped = run_sweep(context)
    _warn_skipped(skipped)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        print_report(rows, console)
    return 0 if all(record.valid for record, _ in done) else 1
