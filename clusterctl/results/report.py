"""The report: per configuration, device count and launcher, median throughput, spread, speedup,
efficiency.

``build_report`` is pure: records in, rows out (``report_of`` reads a runs directory's history and calls
it). Only valid runs count; invalid ones are counted separately so a report never silently mixes a
socket-fallback run into an InfiniBand figure. Speedup is against the median of the 1-device runs of
the same configuration (through the same launcher when there are such runs, else through any);
efficiency is speedup / devices. Runs through ssh and through slurm are separate rows, next to each
other: the same benchmark started two ways.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from clusterctl.results.history import load_runs
from clusterctl.results.pop import ScalingReference, mean_useful_ms, scaling_of
from clusterctl.results.predict import (
    Prediction,
    bus_bandwidth_at,
    effective_bus_bandwidth,
    fused_bytes,
    predict_throughput,
)
from clusterctl.results.record import RunConfig, RunRecord
from clusterctl.results.references import Comparison, Reference, compare, load_references
from clusterctl.results.step import StepModel, StepParts, step_parts
from clusterctl.workloads.gpt_arith import GptShape
from clusterctl.workloads.nccl_tests import LARGE_BUSBW

# The workloads whose bus bandwidth feeds the predictions (GPUs: NCCL's; CPUs: the payload's transport).
COLLECTIVES = ("nccl-tests", "allreduce")


class ReportRow(BaseModel):
    """One configuration at one device count, started by one launcher."""

    config: RunConfig
    devices: int
    launcher: str = Field(description="What started the runs: ssh or slurm.")
    nodes: list[int] = Field(description="Node counts seen among the runs.")
    runs: int = Field(description="Valid runs with a number.")
    invalid_runs: int
    metric: str
    unit: str
    median: float | None
    minimum: float | None
    maximum: float | None
    spread_pct: float | None = Field(description="(max - min) / median, in percent.")
    speedup: float | None = Field(description="Against the 1-device median of the configuration.")
    efficiency: float | None = Field(description="speedup / devices.")
    fabric_gb_per_node: float | None = Field(
        None, description="Median over the valid runs of the GB each node's fabric sent (proof by counters)."
    )
    rail_balance: float | None = Field(
        None, description="Worst least-used / most-used rail ratio of the valid runs; None: one rail."
    )
    predicted: Prediction | None = Field(
        None,
        description="The throughput predicted from the 1-device median and the collective's bus bandwidth "
        "at this device count and the framework's bucket/fusion size (clusterctl.results.predict); "
        "None without both.",
    )
    prediction_verdict: str | None = Field(
        None, description="The median against the predicted range: below, within or above."
    )
    algorithms: list[str] = Field(
        default_factory=list,
        description="The allreduce algorithm/protocol NCCL chose in the valid runs, most used first.",
    )
    comparisons: list[Comparison] = Field(default_factory=list)
    # POP metrics (issue 22 item 2): the median over the valid runs that have them.
    load_balance: float | None = Field(
        None, description="Median over the valid runs of the POP load balance (mean / max useful compute)."
    )
    communication_efficiency: float | None = Field(
        None,
        description="Median over the valid runs of the POP communication efficiency (max useful / step).",
    )
    parallel_efficiency: float | None = Field(
        None, description="Median over the valid runs of the POP parallel efficiency (load balance x comm.)."
    )
    # POP across the configuration's rows (weak scaling): clusterctl.results.pop.
    compute_ms: float | None = Field(
        None, description="Median over the valid runs of the useful compute per step (mean over ranks), ms."
    )
    scaling_reference: ScalingReference | None = Field(
        None,
        description="The configuration's smallest row (through this launcher when it has one) that "
        "computation scalability divides by; None: no row of the configuration recorded a breakdown.",
    )
    computation_scalability: float | None = Field(
        None, description="POP computation scalability: the reference's useful compute / compute_ms."
    )
    global_efficiency: float | None = Field(
        None, description="POP global efficiency: parallel_efficiency x computation_scalability."
    )
    # Model FLOPs utilisation (result.json's `flops`), medians over the valid runs that have them.
    achieved_tflops: float | None = Field(None, description="Median achieved TFLOP/s, all devices together.")
    peak_tflops: float | None = Field(
        None, description="Median peak per device (TFLOP/s) the MFU divides by."
    )
    peak_source: str | None = Field(None, description="datasheet or measured (mixed: both among the runs).")
    mfu: float | None = Field(
        None, description="Median model FLOPs utilisation: achieved / (peak x devices)."
    )
    verdict: str | None = Field(
        None,
        description="`clusterctl explain`'s verdict code for the row's explained_run (set by "
        "clusterctl.explain, above this layer); None: no such run, or not explained.",
    )
    verdict_line: str | None = Field(
        None, description="That verdict's line: the cause in words (set with verdict)."
    )
    explained_run: str | None = Field(
        None,
        description="The run the row's verdict, step and sentence are about: the middle of its valid runs "
        "by throughput (of an even count the slower middle one), among those with a breakdown when any "
        "has one; None: no valid run.",
    )
    step: StepModel | None = Field(
        None,
        description="Where explained_run's step goes (clusterctl.results.step): the compute the prediction "
        "used, the exchange, exposed and hidden, input; None: no valid run.",
    )
    # Real data (issue 23): the input pipeline's own rate, whether training waited on it, time to accuracy.
    loader_images_per_sec: float | None = Field(
        None, description="Median over the valid runs of the input pipeline's rate alone (all ranks, img/s)."
    )
    input_bound: bool | None = Field(
        None, description="Whether a valid run's training waited on its input (the input-bound finding)."
    )
    time_to_target_s: float | None = Field(
        None,
        description="Median over the valid runs that reached run.target_top1 of the wall time to it (s).",
    )
    cold_images_per_sec: float | None = Field(
        None, description="Median over the valid epochs runs of the first (cold) epoch's training img/s."
    )
    warm_images_per_sec: float | None = Field(
        None, description="Median over the valid epochs runs of their later (warm) epochs' median img/s."
    )
    cache_dropped: bool | None = Field(
        None,
        description="Whether every valid run dropped the nodes' page cache first (run --drop-caches): only "
        "then is the first epoch read from storage; None: no valid run.",
    )

    @property
    def workload_label(self) -> str:
        """The workload as the table, its sentence and the page name it: ``resnet50``, or ``resnet50 via
        slurm`` for a row another launcher than the default ssh started."""
        return self.config.workload + ("" if self.launcher == "ssh" else f" via {self.launcher}")


def build_report(records: list[RunRecord], references: list[Reference]) -> list[ReportRow]:
    """Group ``records`` by configuration, devices and launcher, and compare with matching ``references``."""
    groups: dict[tuple[str, int, str], list[RunRecord]] = defaultdict(list)
    for record in records:
        groups[(record.config.model_dump_json(), record.world_size, record.launcher)].append(record)
    rows = [_row(groups[key]) for key in sorted(groups, key=_order)]
    # What a row's prediction reads: the valid collective runs, listed once rather than for each row.
    collectives = [r for r in records if r.valid and r.config.workload in COLLECTIVES]
    baselines: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.devices == 1 and r.median is not None:
            baselines[(r.config.model_dump_json(), r.launcher)] = r.median
            baselines.setdefault((r.config.model_dump_json(), "any"), r.median)
    for row in rows:
        config = row.config.model_dump_json()
        base = baselines.get((config, row.launcher)) or baselines.get((config, "any"))
        if base and row.median is not None:
            row.speedup = row.median / base
            row.efficiency = row.speedup / row.devices
        group = groups[(config, row.devices, row.launcher)]
        explained = next((r for r in group if r.run_id == row.explained_run), None)
        parts = step_parts(explained.breakdown or []) if explained else None
        compute_s = parts.compute_ms / 1e3 if parts and parts.compute_ms else None
        if base and row.devices > 1:
            row.predicted = _predict(row, base, group, collectives, compute_s)
            if row.predicted and row.median is not None:
                row.prediction_verdict = row.predicted.verdict(row.median)
        row.step = _step(row, base, parts, compute_s)
        row.comparisons = _compare(row, references)
    _add_scaling(rows)
    return rows


def middle_run(group: list[RunRecord]) -> RunRecord | None:
    """The run a configuration's row is about: the middle of its valid runs by throughput (of an even
    count the slower middle one; equal throughputs in the order they started), among those with a
    breakdown when any has one (a breakdown is what explains a run); None without a valid run with a
    number."""
    valid = [r for r in group if r.valid and r.value is not None]
    pool = [r for r in valid if r.breakdown] or valid
    if not pool:
        return None
    ordered = sorted(pool, key=lambda r: (r.value or 0.0, r.started_at, r.run_id))
    return ordered[(len(ordered) - 1) // 2]


def _step(
    row: ReportRow, base: float | None, parts: StepParts | None, compute_s: float | None
) -> StepModel | None:
    """The row's ``StepModel``: its explained run's parts with the prediction's exchange; the compute
    the prediction used (measured, else 1-device); None with neither a breakdown nor a 1-device rate."""
    work = row.config.batch_size * (row.config.seq_len or 1)  # gpt: tokens, as its tokens/s
    single = work / base if base else None
    p = row.predicted
    if p is not None:
        compute, source = p.compute_s, p.compute_source
    elif compute_s is not None:
        compute, source = compute_s, "breakdown"
    elif single is not None:
        compute, source = single, "single-device"
    else:
        return None
    return StepModel(
        run_id=row.explained_run,
        compute_s=compute,
        compute_source=source,
        single_device_s=single,
        allreduce_s=p.allreduce_s if p else None,
        bus_bandwidth_gb_s=p.bus_bandwidth_gb_s if p else None,
        parts=parts,
    )


def _add_scaling(rows: list[ReportRow]) -> None:
    """Set each row's reference, computation scalability and global efficiency (``scaling_of``)."""
    for row in rows:
        row.scaling_reference = _scaling_reference(row, rows)
        scaling = scaling_of(row.scaling_reference, row.compute_ms, row.parallel_efficiency)
        if scaling is not None:
            row.computation_scalability = scaling.computation_scalability
            row.global_efficiency = scaling.global_efficiency


def _scaling_reference(row: ReportRow, rows: list[ReportRow]) -> ScalingReference | None:
    """The smallest row of ``row``'s configuration with a median (through ``row``'s launcher when there
    is one, else any) as a reference: its useful compute per step, or, when it recorded no breakdown,
    its whole step (batch per device / per-device rate). None when no row of the configuration
    recorded a breakdown (a collective: its rate is no step of a batch), and for a multi-device row
    with no smaller row of its configuration (as ``explain`` says: unknown)."""
    same = [r for r in rows if r.config == row.config and (r.median or 0) > 0]
    if not any(r.compute_ms is not None for r in same):
        return None
    smallest = min([r for r in same if r.launcher == row.launcher] or same, key=lambda r: r.devices)
    if smallest.devices == row.devices > 1:  # nothing smaller to compare with, as its speedup has none
        return None
    if smallest.compute_ms:  # a figure above zero (``mean_useful_ms`` of measured phases: never below)
        return ScalingReference(devices=smallest.devices, compute_ms=smallest.compute_ms, source="breakdown")
    per_device = (smallest.median or 0.0) / smallest.devices  # above zero: it is in ``same``
    work = smallest.config.batch_size * (smallest.config.seq_len or 1)  # gpt: tokens, as its tokens/s
    step_ms = 1e3 * work / per_device
    return ScalingReference(devices=smallest.devices, compute_ms=step_ms, source="rate")


def _order(key: tuple[str, int, str]) -> tuple[str, int, bool, str]:
    """Rows by configuration and devices, the ssh row first and its slurm twin right after it."""
    config, devices, launcher = key
    return config, devices, launcher != "ssh", launcher


def _predict(
    row: ReportRow, base: float, group: list[RunRecord], collectives: list[RunRecord], compute_s: float | None
) -> Prediction | None:
    """The row's prediction from its explained run's measured compute per step ``compute_s`` (None:
    its 1-device median ``base``) and the matching runs' busbw among ``collectives`` (the valid
    collective runs, gathered once for every row).

    A collective run matches when it ran valid on the same device, node count and world size (and, for
    the CPU ``allreduce``, the same framework: its transport); its busbw is the median of theirs.
    """
    gradients = [r.gradient_bytes for r in group if r.gradient_bytes]
    if not gradients:
        return None
    gradient = int(statistics.median(gradients))
    fused = fused_bytes(row.config.framework, group[0].bucket_cap_mb, gradient)
    matching = [
        r
        for r in collectives
        if r.config.device == row.config.device
        and r.world_size == row.devices
        and r.nodes in row.nodes
        and (r.config.workload != "allreduce" or r.config.framework == row.config.framework)
    ]
    sharded = _predict_sharded(row, base, gradient, matching, compute_s)
    if sharded is not None:
        return sharded
    # FSDP without its own collectives measured: its all-gathers read at the allreduce's bus bandwidth.
    collectives = [r for r in matching if r.config.collective in (None, "allreduce")]
    curve = (bus_bandwidth_at(r.bus_bandwidth, fused) for r in collectives)
    at_fused = [b for b in curve if b is not None and b > 0]
    # Records from before the per-size curve carry only the largest message's figure.
    # (A record judged before zero rates were refused may hold 0: never divided by.)
    largest = [b for r in collectives if LARGE_BUSBW in r.metrics and (b := r.metrics[LARGE_BUSBW].value) > 0]
    if (not at_fused and not largest) or not base > 0:
        return None
    return predict_throughput(
        single_device=base,
        batch_size=row.config.batch_size * (row.config.seq_len or 1),  # gpt: tokens, as its tokens/s
        devices=row.devices,
        gradient_bytes=gradient,
        bus_bandwidth_gb_s=statistics.median(at_fused or largest),
        fused=fused if at_fused else None,
        compute_s=compute_s,
    )


def _predict_sharded(
    row: ReportRow, base: float, gradient: int, collectives: list[RunRecord], compute_s: float | None
) -> Prediction | None:
    """An FSDP gpt row's prediction from the all-gather's and the reduce-scatter's measured bus bandwidth
    (each the median of its runs, read at one block's message: ``GptShape.fsdp_block_messages``), the
    bytes of each a step moves (``GptShape.fsdp_split``), made one ``effective_bus_bandwidth``; None
    for other rows, or without runs of both collectives."""
    c = row.config
    if c.framework != "fsdp" or c.model_size is None or c.seq_len is None:
        return None
    shape = GptShape.named(c.model_size, c.seq_len)
    split = shape.fsdp_split(c.precision)
    messages = shape.fsdp_block_messages(c.precision)
    measured: dict[str, float] = {}
    for op, message in messages.items():
        at = [
            b
            for r in collectives
            if r.config.collective == op
            and (b := bus_bandwidth_at(r.bus_bandwidth, message)) is not None
            and b > 0
        ]
        if not at:
            return None
        measured[op] = statistics.median(at)
    return predict_throughput(
        single_device=base,
        batch_size=c.batch_size * c.seq_len,
        devices=row.devices,
        gradient_bytes=gradient,
        bus_bandwidth_gb_s=effective_bus_bandwidth([(split[op], measured[op]) for op in split]),
        fused=messages["allgather"],
        by_collective=measured,
        compute_s=compute_s,
    )


def report_of(runs_dir: Path) -> tuple[list[ReportRow], list[str]]:
    """The report of every run recorded in ``runs_dir`` (each run directory's result.json), against the
    shipped references, and one line per run directory (or index) left out (``load_runs``).

    Raises:
        InputError: as ``load_runs``.
    """
    history = load_runs(runs_dir)
    return build_report(history.runs, load_references()), history.skipped


def _row(group: list[RunRecord]) -> ReportRow:
    first = group[0]
    values = [r.value for r in group if r.valid and r.value is not None]
    unit = next((r.metrics[r.primary_metric].unit for r in group if r.primary_metric in r.metrics), "")
    median = statistics.median(values) if values else None
    low, high = (min(values), max(values)) if values else (None, None)
    proofs = [r.counters for r in group if r.valid and r.value is not None and r.counters]
    sent = [p.bytes_per_node / 1e9 for p in proofs if p.bytes_per_node is not None]
    balances = [p.rail_balance for p in proofs if p.rail_balance is not None]
    chosen: dict[str, int] = defaultdict(int)
    for r in group:
        for name, count in r.fabric.algorithms.items() if r.valid else ():
            chosen[name] += count
    return ReportRow(
        config=first.config,
        devices=first.world_size,
        launcher=first.launcher,
        nodes=sorted({r.nodes for r in group}),
        runs=len(values),
        invalid_runs=sum(not r.valid for r in group),
        metric=first.primary_metric,
        unit=unit,
        median=median,
        minimum=low,
        maximum=high,
        spread_pct=100 * (high - low) / median if median and high is not None and low is not None else None,
        speedup=None,
        efficiency=None,
        fabric_gb_per_node=statistics.median(sent) if sent else None,
        rail_balance=min(balances) if balances else None,
        algorithms=sorted(chosen, key=lambda name: -chosen[name]),
        explained_run=explained.run_id if (explained := middle_run(group)) else None,
        **_pop_medians(group),
        **_utilisation(group),
        **_input_figures(group),
    )


def _input_figures(group: list[RunRecord]) -> dict[str, float | bool | None]:
    """The row's real-data fields: loader rate, time to target and the cold and warm epochs' rates
    (medians), the input-bound verdict, and whether the page cache was dropped."""
    valid = [r for r in group if r.valid and r.value is not None]

    def median_of(name: str) -> float | None:
        values = [r.metrics[name].value for r in valid if name in r.metrics]
        return statistics.median(values) if values else None

    trained = [r for r in valid if r.config.data == "real"]
    return {
        "loader_images_per_sec": median_of("loader_images_per_sec"),
        "input_bound": any(f.code == "input-bound" for r in trained for f in r.findings) if trained else None,
        "time_to_target_s": median_of("time_to_target_s"),
        "cold_images_per_sec": median_of("cold_images_per_sec"),
        "warm_images_per_sec": median_of("warm_images_per_sec"),
        "cache_dropped": all(r.cache_dropped for r in valid) if valid else None,
    }


def _pop_medians(group: list[RunRecord]) -> dict[str, float | None]:
    """The row's POP metrics and useful compute per step: each the median over its valid runs with a
    number and that figure."""
    valid = [r for r in group if r.valid and r.value is not None]
    pops = [r.pop for r in valid if r.pop]
    names = ("load_balance", "communication_efficiency", "parallel_efficiency")
    computes = [c for r in valid if (c := mean_useful_ms(r.breakdown or [])) is not None]
    return {
        **{name: statistics.median(getattr(p, name) for p in pops) if pops else None for name in names},
        "compute_ms": statistics.median(computes) if computes else None,
    }


def _utilisation(group: list[RunRecord]) -> dict[str, float | str | None]:
    """The row's MFU fields: medians over the valid runs with a FLOPs record."""
    flops = [r.flops for r in group if r.valid and r.value is not None and r.flops]
    peaks = [f.peak_tflops for f in flops if f.peak_tflops is not None]
    ratios = [f.mfu for f in flops if f.mfu is not None]
    sources = {f.peak_source for f in flops if f.peak_source}
    return {
        "achieved_tflops": statistics.median(f.achieved_tflops for f in flops) if flops else None,
        "peak_tflops": statistics.median(peaks) if peaks else None,
        "peak_source": sources.pop() if len(sources) == 1 else "mixed" if sources else None,
        "mfu": statistics.median(ratios) if ratios else None,
    }


def _compare(row: ReportRow, references: list[Reference]) -> list[Comparison]:
    config = row.config.model_dump()
    observed = {"speedup": row.speedup, "efficiency": row.efficiency, "total_images_per_sec": row.median}
    out = []
    for ref in references:
        if any(config.get(key) != value for key, value in ref.match.items()):
            continue
        for point in ref.points:
            value = observed.get(point.metric)
            if point.devices == row.devices and value is not None:
                out.append(compare(ref, point, value))
    return out


CSV_COLUMNS = [
    "workload",
    "model",
    "framework",
    "precision",
    "batch_size",
    "image_size",
    "model_size",
    "seq_len",
    "activation_checkpointing",
    "collective",
    "image_profile",
    "device",
    "devices",
    "launcher",
    "runs",
    "invalid_runs",
    "metric",
    "unit",
    "median",
    "minimum",
    "maximum",
    "spread_pct",
    "speedup",
    "efficiency",
    "fabric_gb_per_node",
    "rail_balance",
    "predicted_no_overlap",
    "predicted_full_overlap",
    "prediction_verdict",
    "algorithms",
    # POP metrics
    "load_balance",
    "communication_efficiency",
    "parallel_efficiency",
    "compute_ms",
    "reference_compute_ms",
    "computation_scalability",
    "global_efficiency",
    "achieved_tflops",
    "peak_tflops",
    "peak_source",
    "mfu",
    "verdict",
    "data",
    "loader_images_per_sec",
    "input_bound",
    "time_to_target_s",
    "cold_images_per_sec",
    "warm_images_per_sec",
    "cache_dropped",
]


# The versions in `report --json` and `sweep --json`, each bumped when a field changes meaning or goes
# away: the document's (an object, so that even an empty report says what it is) and each row's.
REPORT_SCHEMA = "clusterctl.report/1"
# /2: predicted.compute_s, no_overlap and full_overlap are at the measured compute per step where
# compute_source is "breakdown" (they were always at the 1-device time); verdict_line, explained_run and
# step added.
ROW_SCHEMA = "clusterctl.report-row/2"


def report_json(rows: list[ReportRow]) -> dict[str, object]:
    """The report as `report --json` prints it: its ``schema``, then ``rows``, each row's fields after
    its own ``schema``. No runs give ``rows: []`` under the same schema."""
    return {
        "schema": REPORT_SCHEMA,
        "rows": [{"schema": ROW_SCHEMA, **row.model_dump(mode="json")} for row in rows],
    }


def report_csv(rows: list[ReportRow]) -> str:
    """The report as CSV text, one line per row (comparisons are in the JSON form)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        flat = {
            **row.config.model_dump(),
            **row.model_dump(exclude={"config", "comparisons", "nodes", "predicted", "scaling_reference"}),
        }
        flat["reference_compute_ms"] = row.scaling_reference.compute_ms if row.scaling_reference else None
        flat["predicted_no_overlap"] = row.predicted.no_overlap if row.predicted else None
        flat["predicted_full_overlap"] = row.predicted.full_overlap if row.predicted else None
        flat["algorithms"] = " ".join(row.algorithms)
        writer.writerow({k: flat[k] for k in CSV_COLUMNS})
    return buffer.getvalue()
