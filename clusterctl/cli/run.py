"""`clusterctl run`, `report` and `sweep`: launch a workload, report the history, run a grid."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    output_dir,
    output_file,
    positive_int,
    print_json,
    split_option,
    warn,
    writing,
)
from clusterctl.terminal import safe_text
from clusterctl.workloads import NAMES

if TYPE_CHECKING:
    from clusterctl.results.counters import CounterExpectation, CounterProof, NodeTraffic
    from clusterctl.results.record import RunRecord
    from clusterctl.run.context import RunContext

RunsDirOption = typer.Option(Path("runs"), "--runs-dir", help="Where run directories and history.sqlite go.")
JsonOption = typer.Option(False, "--json", help="Machine-readable output on stdout.")
# The version of each object `run --dry-run --json` (and sweep's) prints, one per plan: it changes when a
# field changes meaning or goes away.
DRY_RUN_SCHEMA = "clusterctl.run-dry-run/1"
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
    """``  counters (eth0): node1 1.02/1.02 GB, ... sent/received; floor 0.92 GB per node, 1.38 GB mean
    (ring/tree)``; with RDMA judged, each node's IPoIB share after its totals."""

    def moved(t: NodeTraffic) -> str:
        if t.error:
            return "unknown"
        ipoib = f" (IPoIB {t.ipoib_sent / 1e9:.2f}/{t.ipoib_received / 1e9:.2f})" if t.ipoib else ""
        return f"{t.sent / 1e9:.2f}/{t.received / 1e9:.2f} GB{ipoib}"

    nodes = ", ".join(f"{name} {moved(t)}" for name, t in proof.nodes.items())
    floor, mean = proof.floor_bytes_per_node, proof.mean_floor_bytes_per_node
    judged = " RDMA" if proof.rdma_only else ""
    means = f", {mean / 1e9:.2f} GB mean" if mean and mean != floor else ""
    return f"  counters ({proof.fabric}): {nodes} sent/received" + (
        f"; floor{judged} {floor / 1e9:.2f} GB per node{means} ({proof.bound})" if floor else ""
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


# What a bare --data reads: clusterctl.data.probe.DEFAULT_DATA (a unit test keeps them equal; not imported,
# so that --help loads no data module).
BARE_DATA = "/data/synth"


class RunCommand(TyperCommand):
    """`run`'s command: a ``--data`` with no value (the last word, or one followed by an option) reads
    ``BARE_DATA``, the dataset `data synth` writes with no arguments. A dataset's path is absolute, so a
    word starting with '-' is never one."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # Any: typer's own vendored click Context
        """``args`` with ``BARE_DATA`` after each bare ``--data`` (before a ``--``), then click's parse."""
        given = list(args)
        end = given.index("--") if "--" in given else len(given)
        for i in reversed(range(end)):
            if given[i] == "--data" and (i + 1 == len(given) or given[i + 1].startswith("-")):
                given.insert(i + 1, BARE_DATA)
        return super().parse_args(ctx, given)


def run(
    workload: str = typer.Argument(..., help=f"One of: {', '.join(NAMES)}."),
    inventory: Path | None = InventoryOption,
    nodes: int | None = typer.Option(
        None, "--nodes", min=1, help="Primary plus N-1 secondaries (default: all)."
    ),
    ranks_per_node: int | None = typer.Option(
        None, "--ranks-per-node", min=1, max=256, help="Default: GPUs per node (1 on CPU); at most 256."
    ),
    framework: str | None = typer.Option(None, "--framework", help="horovod, ddp or fsdp (gpt only)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Per device."),
    precision: str | None = typer.Option(None, "--precision", help="fp32, fp16 or bf16."),
    channels_last: bool | None = typer.Option(None, "--channels-last/--channels-first", help="NHWC / NCHW."),
    xla: bool | None = typer.Option(None, "--xla/--no-xla", help="XLA (TensorFlow) or torch.compile."),
    steps: int | None = typer.Option(None, "--steps", help="Measured steps."),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", help="Steps before measuring."),
    image_size: int | None = typer.Option(None, "--image-size", help="Synthetic image side in pixels."),
    model_size: str | None = typer.Option(
        None, "--model-size", help="gpt: tiny, 124m, 350m, 1.3b or L<layers>-H<heads>-W<width>."
    ),
    seq_len: int | None = typer.Option(None, "--seq-len", help="gpt: tokens per sequence."),
    activation_checkpointing: bool | None = typer.Option(
        None,
        "--activation-checkpointing/--no-activation-checkpointing",
        help="gpt: recompute each block's activations in backward (less memory, more compute).",
    ),
    collective: str | None = typer.Option(
        None, "--op", "--collective", help="allreduce, nccl-tests: allreduce, allgather or reducescatter."
    ),
    trace: bool | None = typer.Option(
        None,
        "--trace/--no-trace",
        help="Keep a trace of 3 steps per rank in the run directory's trace/ (torch.profiler; Horovod's "
        "timeline too), openable in ui.perfetto.dev. resnet50 only.",
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        help=f"resnet50: 'synthetic', or an ImageNet-layout directory in the container (run.data); alone, "
        f"{BARE_DATA}: where `data synth` writes by default.",
    ),
    loader_workers: int | None = typer.Option(None, "--loader-workers", help="DataLoader workers per rank."),
    loader_only: bool | None = typer.Option(
        None,
        "--loader-only",
        help="Real data: the input pipeline alone on every node (img/s per node, per worker).",
    ),
    skip_bad_images: bool | None = typer.Option(
        None, "--skip-bad-images", help="Real data: leave out and count files that do not decode."
    ),
    epochs: int | None = typer.Option(
        None, "--epochs", help="Real data: train N epochs, evaluating after each."
    ),
    target_top1: float | None = typer.Option(
        None, "--target-top1", help="Real data: report the epoch and time val top-1 first reaches X."
    ),
    drop_caches: bool | None = typer.Option(
        None,
        "--drop-caches",
        help="Drop every node's page cache before each repeat (root on hosts; not on containers).",
    ),
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
    from clusterctl.run.conductor import run_plans
    from clusterctl.run.context import run_context
    from clusterctl.run.plan import plan_run

    if trace and workload != "resnet50":
        from clusterctl.errors import InputError

        raise InputError(
            f"--trace: the {workload} workload has no trace; only resnet50 keeps one (torch.profiler and "
            "Horovod's timeline). Fix: drop --trace, or run resnet50."
        )
    _refuse_other_workloads(
        workload, activation_checkpointing=activation_checkpointing, collective=collective
    )
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
        model_size=model_size,
        seq_len=seq_len,
        activation_checkpointing=activation_checkpointing,
        collective=collective,
        trace=trace,
        data=data,
        loader_workers=loader_workers,
        loader_only=loader_only,
        skip_bad_images=skip_bad_images,
        epochs=epochs,
        target_top1=target_top1,
        drop_caches=drop_caches,
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
    _check_job_images(context)
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


def _refuse_other_workloads(workload: str, **options: object) -> None:
    """Refuse ``--activation-checkpointing`` off ``gpt`` and ``--op`` off the collectives: ignored, they
    would let a user believe they had measured what they asked for.

    Raises:
        InputError: such an option given to a workload that does not read it.
    """
    from clusterctl.errors import InputError

    readers = {"activation_checkpointing": ("gpt",), "collective": ("allreduce", "nccl-tests")}
    for name, value in options.items():
        if value and workload not in readers[name]:
            option = "--op" if name == "collective" else f"--{name.replace('_', '-')}"
            raise InputError(
                f"{option}: the {workload} workload does not read it; only {' and '.join(readers[name])} "
                f"do. Fix: drop {option}, or run {readers[name][0]}."
            )


def _check_job_images(context: RunContext) -> None:
    """Refuse, before anything is submitted (dry runs too), a plan whose image, the one its launcher runs,
    is known to lack what its ranks need (the preflight collective's included).

    Raises:
        InputError: as ``clusterctl.workloads.image_caps.check_job_image``.
    """
    from clusterctl.workloads.image_caps import check_job_image

    image = context.backend.job_image(context.inventory)
    for plan, _ in context.in_order():
        check_job_image(context.inventory, image, plan)


def _print_dry_run(context: RunContext, as_json: bool) -> None:
    """What the backend would run for each job, in order (``Backend.describe``: the mpirun command, or
    the batch script), and (on stderr, so the command still pastes exactly; in --json, beside it) the
    bytes per node the proof by counters will expect."""
    from clusterctl.run.judge import job_expectation

    in_order = context.in_order()
    described = [context.backend.describe(context.inventory, job) for job, _ in in_order]
    expectations = [job_expectation(job, workload) for job, workload in in_order]
    if as_json:
        print_json(
            [
                {"schema": DRY_RUN_SCHEMA, **description.fields, "counters": _dumped(expected)}
                for description, expected in zip(described, expectations, strict=True)
            ]
        )
        return
    for description, expected in zip(described, expectations, strict=True):
        _say_expectation(expected)
        print(description.text, end="")  # plain: the command or script must paste exactly


def _dumped(expected: CounterExpectation | None) -> dict[str, object] | None:
    return None if expected is None else expected.model_dump(mode="json")


def _say_expectation(expected: CounterExpectation | None) -> None:
    if expected is not None:
        err_console.print(expected.words(), markup=False, highlight=False)


def report(
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
    csv_file: Path | None = typer.Option(None, "--csv", help="Also write the report as CSV to FILE."),
    plot_file: Path | None = typer.Option(
        None,
        "--plot",
        help="Also write the scaling figures (PNG, one per configuration) to FILE: throughput bars with "
        "the speedup, ideal scaling, the predicted range, efficiency and the published references.",
    ),
    html_dir: Path | None = typer.Option(
        None,
        "--html",
        help="Also write one self-contained page, DIR/index.html: per configuration the verdict, its cause, "
        "the phases per node and the findings; the table, the figures, every run's findings and links to "
        "the run directories (for sharing an acceptance result).",
    ),
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every column, however wide (by default columns are left out to fit the terminal).",
    ),
    rebuild: bool = typer.Option(
        False,
        "--rebuild-index",
        help="First write history.sqlite (the index of the run directories) anew from the run directories' "
        "result.json files. The report reads those files either way.",
    ),
) -> int:
    """Per configuration: devices, img/s median and spread, speedup, efficiency, references."""
    from clusterctl.explain.gather import explained_report
    from clusterctl.results.report import report_csv, report_json
    from clusterctl.results.report_table import print_report

    csv_file = output_file(csv_file, "--csv") if csv_file else None
    plot_file = output_file(plot_file, "--plot", suffix=".png") if plot_file else None
    if html_dir is not None:
        output_dir(html_dir, "--html")
    if rebuild:
        from clusterctl.results.history import history_path, rebuild_index

        with writing(history_path(runs_dir), "--rebuild-index"):
            indexed = rebuild_index(runs_dir)
        if runs_dir.is_dir():  # else nothing was written: the report says no runs are recorded
            err_console.print(
                safe_text(f"{history_path(runs_dir)}: indexed {indexed} run directories"),
                markup=False,
                highlight=False,
            )
    rows, skipped = explained_report(runs_dir)
    _warn_skipped(skipped)
    if csv_file:
        with writing(csv_file, "--csv"):
            csv_file.write_text(report_csv(rows))
    if plot_file:
        from clusterctl.results.plot import plot_report  # matplotlib: imported only when a plot is asked for

        with writing(plot_file, "--plot"):
            plot_report(rows, plot_file)
    if html_dir is not None:
        from clusterctl.explain.gather import page_explanations
        from clusterctl.results.history import load_runs
        from clusterctl.results.html import write_html

        history = load_runs(runs_dir)
        with writing(html_dir, "--html"):
            page = write_html(rows, history, runs_dir, html_dir, page_explanations(rows, history, runs_dir))
        err_console.print(safe_text(f"report page: {page}"), markup=False, highlight=False)
    if as_json:
        print_json(report_json(rows))
    elif not rows:
        console.print(
            safe_text(f"no runs recorded in {runs_dir} yet; `clusterctl run` records them"), markup=False
        )
    else:
        print_report(rows, console, wide=wide)
    return 0


def _warn_skipped(skipped: list[str]) -> None:
    """One warning naming the run directories (or the index) the report left out, at most five of them."""
    if skipped:
        more = f"; and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        warn(f"{len(skipped)} history entries left out of the report: {'; '.join(skipped[:5])}{more}")


def sweep(
    workload: str = typer.Argument("resnet50", help=f"One of: {', '.join(NAMES)}."),
    inventory: Path | None = InventoryOption,
    gpus: str = typer.Option("1", "--gpus", help="Device counts, comma-separated, e.g. 1,4,8."),
    batch_size: str | None = typer.Option(None, "--batch-size", help="Batch sizes per device, e.g. 128,256."),
    precision: str | None = typer.Option(None, "--precision", help="Precisions, e.g. fp16,fp32."),
    framework: str | None = typer.Option(None, "--framework", help="Frameworks, e.g. horovod,ddp."),
    model_size: str | None = typer.Option(
        None, "--model-size", help="gpt: model sizes, e.g. tiny,124m,L4-H4-W256."
    ),
    seq_len: str | None = typer.Option(None, "--seq-len", help="gpt: sequence lengths, e.g. 512,1024."),
    activation_checkpointing: bool | None = typer.Option(
        None, "--activation-checkpointing/--no-activation-checkpointing", help="gpt: for every run."
    ),
    data: str | None = typer.Option(
        None, "--data", help="Inputs side by side, e.g. synthetic,/data/imagenet (resnet50; see run --data)."
    ),
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
    from clusterctl.explain.gather import add_verdicts, worst_row_line
    from clusterctl.results.history import load_runs
    from clusterctl.results.report import report_json
    from clusterctl.results.report_table import print_report
    from clusterctl.run.conductor import run_sweep
    from clusterctl.run.context import run_context
    from clusterctl.run.sweep import plan_sweep

    devices = split_option(gpus, "--gpus", positive_int, "a whole number of at least 1")
    grid: dict[str, list[object]] = {}
    for name, option, numbers in (
        ("batch_size", "--batch-size", batch_size),
        ("seq_len", "--seq-len", seq_len),
    ):
        if numbers is not None:
            grid[name] = split_option(numbers, option, positive_int, "a whole number of at least 1")
    for name, option, values in (
        ("precision", "--precision", precision),
        ("framework", "--framework", framework),
        ("model_size", "--model-size", model_size),
        ("data", "--data", data),
    ):
        if values is not None:
            grid[name] = split_option(values, option, str, "a name")
    _refuse_other_workloads(workload, activation_checkpointing=activation_checkpointing)
    every = (
        ("steps", steps),
        ("image_size", image_size),
        ("activation_checkpointing", activation_checkpointing),
    )
    grid |= {name: [value] for name, value in every if value is not None}
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
    _check_job_images(context)
    if dry_run:
        _print_dry_run(context, as_json)
        return 0
    done, rows, skipped = run_sweep(context)
    _warn_skipped(skipped)
    history = load_runs(runs_dir)
    add_verdicts(rows, history, runs_dir)
    worst = worst_row_line(rows, [record for record, _ in done], history, runs_dir)
    if as_json:
        print_json(report_json(rows))
    else:
        print_report(rows, console)
        if worst:
            console.print(safe_text(worst), markup=False, highlight=False, soft_wrap=False)
    return 0 if all(record.valid for record, _ in done) else 1
