"""`clusterctl run`, `report` and `sweep`: launch a workload, report the history, run a grid."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    load,
    positive_int,
    print_json,
    split_option,
)
from clusterctl.workloads import NAMES, get_workload

if TYPE_CHECKING:
    from rich.table import Table

    from clusterctl.inventory import Inventory
    from clusterctl.launch import LaunchPlan, RunOptions
    from clusterctl.results.record import RunRecord
    from clusterctl.results.report import ReportRow

RunsDirOption = typer.Option(Path("runs"), "--runs-dir", help="Where run directories and history.sqlite go.")
JsonOption = typer.Option(False, "--json", help="Machine-readable output on stdout.")
TimeoutOption = typer.Option(3600.0, "--timeout", min=1, help="Seconds one run may take before it is killed.")
RepeatsOption = typer.Option(1, "--repeats", min=1, help="Run K times; report the median and spread.")
DryRunOption = typer.Option(False, "--dry-run", help="Print the mpirun command and stop.")


def _line_printer(as_json: bool):
    out = err_console if as_json else console
    return lambda line: out.print(line, markup=False, highlight=False)


def _execute(
    inventory: Inventory, plan: LaunchPlan, repeats: int, timeout: float, runs_dir: Path, as_json: bool
) -> list[RunRecord]:
    from clusterctl.diagnostics.bundle import write_bundle
    from clusterctl.diagnostics.collect import collect
    from clusterctl.runner import run_benchmark

    with tempfile.TemporaryDirectory(prefix="clusterctl-topology-") as snapshot:
        nodes = [inventory.node(h.node) for h in plan.hosts]
        write_bundle(Path(snapshot), collect(inventory, nodes))
        done = run_benchmark(
            inventory,
            plan,
            get_workload(plan.options.workload),
            repeats=repeats,
            timeout_s=timeout,
            runs_dir=runs_dir,
            on_line=_line_printer(as_json),
            topology_dir=Path(snapshot),
        )
    if not as_json:
        for record, directory in done:
            _print_record(record, directory)
    return [record for record, _ in done]


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
    for finding in record.findings:
        colour = "red" if finding.severity == "error" else "yellow"
        console.print(f"  [{colour}]{finding.severity}[/] {finding.code}: {finding.message}", highlight=False)


def _summary(records: list[RunRecord]) -> dict[str, object]:
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
        None, "--ranks-per-node", min=1, help="Default: GPUs per node (1 on CPU)."
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
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
) -> None:
    """Run WORKLOAD across the cluster with mpirun in the primary container; record and judge it."""
    from clusterctl.launch import build_plan, run_options

    inv = load(inventory)
    data_format = None if channels_last is None else ("NHWC" if channels_last else "NCHW")
    options = run_options(
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
    plan = build_plan(inv, options, get_workload(workload))
    if dry_run:
        _print_plans([plan], as_json)
        return
    records = _execute(inv, plan, repeats, timeout, runs_dir, as_json)
    summary = _summary(records)
    if as_json:
        print_json(summary)
    elif repeats > 1 and summary["median"] is not None:
        console.print(
            f"median of {repeats}: {summary['median']:,.2f} (min {summary['min']:,.2f}, max {summary['max']:,.2f})"
        )
    if not summary["valid"]:
        raise typer.Exit(1)


def _print_plans(plans: list[LaunchPlan], as_json: bool) -> None:
    if as_json:
        print_json([{"argv": p.argv, "env": p.env, "command": p.shell_command()} for p in plans])
        return
    for plan in plans:
        # Plain print: the command must paste exactly, without rich wrapping or markup.
        print(plan.shell_command())


def report(
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
    csv_file: Path | None = typer.Option(None, "--csv", help="Also write the report as CSV to FILE."),
    plot_file: Path | None = typer.Option(
        None, "--plot", help="Also write the scaling figure (PNG) to FILE."
    ),
) -> None:
    """Per configuration: devices, img/s median and spread, speedup, efficiency, references."""
    from clusterctl.results.history import history_path, load_runs
    from clusterctl.results.references import load_references
    from clusterctl.results.report import build_report, report_csv

    rows = build_report(load_runs(history_path(runs_dir)), load_references())
    if csv_file:
        csv_file.write_text(report_csv(rows))
    if plot_file:
        from clusterctl.results.plot import plot_report  # matplotlib: imported only when a plot is asked for

        plot_report(rows, plot_file)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    if not rows:
        console.print(f"no runs recorded in {history_path(runs_dir)} yet; `clusterctl run` records them")
        return
    console.print(_table(rows))


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _table(rows: list[ReportRow]) -> Table:
    from rich.table import Table

    table = Table(title="clusterctl report")
    for column in (
        "workload",
        "model",
        "framework",
        "precision",
        "batch",
        "device",
        "devices",
        "nodes",
        "runs",
        "median",
        "spread",
        "speedup",
        "efficiency",
        "reference",
    ):
        table.add_column(column)
    for r in rows:
        c = r.config
        refs = "; ".join(
            f"{x.metric} {x.observed:.2f} vs {x.expected:g} [{x.verdict}]" for x in r.comparisons
        )
        table.add_row(
            c.workload,
            c.model,
            c.framework,
            c.precision,
            str(c.batch_size),
            c.device,
            str(r.devices),
            ",".join(map(str, r.nodes)),
            f"{r.runs}" + (f" (+{r.invalid_runs} invalid)" if r.invalid_runs else ""),
            f"{_fmt(r.median, ',.1f')} {r.unit}",
            f"{_fmt(r.spread_pct, '.1f')}%",
            _fmt(r.speedup, ".2f") + "x",
            _fmt(None if r.efficiency is None else 100 * r.efficiency, ".1f") + "%",
            refs or "-",
        )
    return table


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
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
) -> None:
    """Run the grid (device counts x settings), then report it."""
    from clusterctl.launch import build_plan
    from clusterctl.sweep import plan_sweep

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
    option_list: list[RunOptions] = plan_sweep(inv, workload, devices, grid)
    plans = [build_plan(inv, options, get_workload(workload)) for options in option_list]
    if dry_run:
        _print_plans(plans, as_json)
        return
    records = [r for plan in plans for r in _execute(inv, plan, repeats, timeout, runs_dir, as_json)]
    report(runs_dir=runs_dir, as_json=as_json, csv_file=None, plot_file=None)
    if not all(r.valid for r in records):
        raise typer.Exit(1)
