"""Judging one run: what its launch collected into its finished ``RunRecord``.

``judge_collected`` takes what the backend collected (``Collected``: output, counters, snapshots,
telemetry) and returns the record with every finding in it (the exit, sanity, fabric proof by log and
counters, the snapshot's and each GPU's chosen NIC's, the traces not kept) before ``valid`` is
decided, and what the run directory keeps (the output without its trace parts, the traces, each node's
telemetry file). ``judge_run`` is its pure core on the output text. The run id is the run directory's
name, fixed before the run is judged (``clusterctl.run.rundir.new_run_dir``).

The record model is ``clusterctl.results.record``; the run directory it is written to,
``clusterctl.run.rundir``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from clusterctl.diagnostics.bundle import NodeBundle
from clusterctl.diagnostics.model import marker_values
from clusterctl.diagnostics.parsers.mpi_error import parse_mpi_error
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory, RunDefaults
from clusterctl.results.counters import (
    CounterExpectation,
    CounterReadings,
    counter_expectation,
    counter_findings,
    prove_counters,
)
from clusterctl.results.mfu import ModelFlops, model_flops
from clusterctl.results.nccl_log_proof import fabric_findings, prove_fabric, settle_snapshot
from clusterctl.results.peaks import load_peaks
from clusterctl.results.pop import run_pop
from clusterctl.results.record import LauncherName, RunConfig, RunRecord, run_device
from clusterctl.results.telemetry_status import telemetry_files
from clusterctl.results.traces import split_traces, trace_finding
from clusterctl.run.backends import Collected
from clusterctl.workloads.base import Metric, Workload
from clusterctl.workloads.compute import ComputeFacts
from clusterctl.workloads.job import Job


def _data_kind(workload: Workload, s: RunDefaults) -> str:
    """``RunConfig.data``: real when the run read files (run.data, or tf_cnn_benchmarks' run.data_dir)."""
    real = s.data != "synthetic" or (workload.reads_tfrecords and s.data_dir is not None)
    return "synthetic" if not real else "real-loader" if s.loader_only else "real"


@dataclass(frozen=True)
class Judged:
    """A judged run: its finished record, and what its run directory keeps of what was collected."""

    record: RunRecord
    output: str
    """The output without its trace parts (output.log)."""
    traces: Mapping[str, bytes] = field(default_factory=dict)
    telemetry: Mapping[str, str] = field(default_factory=dict)
    """Each node's telemetry file (JSON Lines), by node; nodes without a sample left out."""


def judge_collected(
    inventory: Inventory,
    plan: Job,
    workload: Workload,
    collected: Collected,
    exit_code: int,
    *,
    run_id: str,
    started_at: datetime,
    launcher: LauncherName = "ssh",
    starter: str = "mpirun",
    cache_dropped: bool = False,
) -> Judged:
    """The finished record of the run ``run_id`` from what its launch collected, and what its run
    directory keeps (see the module's docstring)."""
    # Imported on use: it pulls the collectors.
    from clusterctl.diagnostics.check import bundle_findings

    topology = collected.bundles.get("topology")
    output, traces, trace_problems = split_traces(collected.output)
    telemetry: dict[str, str] = {}
    unknown: dict[str, list[str]] | None = None
    if collected.telemetry is not None:
        telemetry, unknown = telemetry_files(collected.telemetry, collected.telemetry_errors)
    record = judge_run(
        inventory,
        plan,
        workload,
        output,
        exit_code,
        run_id=run_id,
        started_at=started_at,
        counters=collected.counters,
        snapshot=bundle_findings(inventory, topology) if topology is not None else [],
        topology=topology,
        launcher=launcher,
        starter=starter,
        cache_dropped=cache_dropped,
        trace_problems=trace_problems,
        telemetry_unknown=unknown,
    )
    return Judged(record, output, traces, telemetry)


def judge_run(
    inventory: Inventory,
    plan: Job,
    workload: Workload,
    output: str,
    exit_code: int,
    *,
    run_id: str,
    started_at: datetime,
    counters: CounterReadings | None = None,
    snapshot: Sequence[Finding] = (),
    topology: Mapping[str, NodeBundle] | None = None,
    launcher: LauncherName = "ssh",
    starter: str = "mpirun",
    cache_dropped: bool = False,
    trace_problems: Sequence[str] = (),
    telemetry_unknown: dict[str, list[str]] | None = None,
) -> RunRecord:
    """Judge one run's output (its trace parts taken out): its metrics, sanity findings, fabric proof,
    per-rank breakdown and POP metrics, every finding in the record before ``valid`` is decided.

    ``counters``: the nodes' fabric counters read before and after the run, when they were.
    ``snapshot``: the findings of the run's topology snapshot; its peer-memory ones join the run's
    findings as the run's NCCL log settles them (``settle_snapshot``). ``topology``: the snapshot itself
    (None: none taken), against which each GPU's GDR and rail is judged by the NIC its channels used
    (warnings). ``launcher``: what started the run; ``starter``: what the exit code is the exit code of,
    in words (``Backend.starter``);
    ``cache_dropped``: the nodes' page cache was dropped first; ``trace_problems``: traces the run
    printed but the run directory does not keep (warnings); ``telemetry_unknown``: what the node
    samplers could not tell, by node (None: no sampler ran).
    """
    # Imported on use: it pulls the collectors.
    from clusterctl.diagnostics.check import chosen_nic_findings

    s = plan.options.settings
    primary = inventory.primary
    config = RunConfig.model_validate(
        {
            "workload": workload.name,
            "model": workload.model,
            "framework": s.framework,
            "precision": s.precision,
            "batch_size": s.batch_size,
            "image_size": s.image_size,
            "image_profile": inventory.image.profile,
            "device": run_device(inventory),
            "data": _data_kind(workload, s),
        }
        | workload.config_fields(s)  # a workload may name its model per configuration (nccl-tests' binary)
    )
    fabric = prove_fabric(
        output,
        fabric_kind=primary.fabric.kind,
        gpu=plan.gpu,
        nodes=len(plan.hosts),
        hcas=primary.fabric.hca or (),
        ranks_per_node=min(h.slots for h in plan.hosts),
        gdr_level=s.gdr_level,
    )
    gradient = workload.gradient_bytes(s)
    proof = None
    if counters is not None:
        proof = prove_counters(
            *counters,
            fabric=primary.fabric,
            expectation=job_expectation(plan, workload),
            in_network=fabric.in_network,
            # NCCL's gradients must go over verbs; CPU ranks' Gloo/MPI use TCP on the fabric by design.
            rdma_only=plan.gpu and primary.rdma,
        )
    reading = workload.read(output, plan)  # the workload's own parse of the output, once
    metrics, figure_problems = checked_metrics(reading.metrics)
    breakdown = reading.breakdown
    findings = [
        *_exit_findings(output, exit_code, plan, starter),
        *figure_problems,
        *reading.sanity,
        *fabric_findings(fabric),
        *settle_snapshot(snapshot, fabric),
        *(counter_findings(proof) if proof else ()),
        *placement_findings(output),
        # Each GPU's GDR and rail, judged against the NIC its channels used (warnings: validity stands).
        *chosen_nic_findings(inventory, topology or {}, fabric.gpu_nics, fabric.gpu_gdr),
        *(trace_finding(problem) for problem in trace_problems),
    ]
    return RunRecord(
        run_id=run_id,
        started_at=started_at,
        config=config,
        nodes=len(plan.hosts),
        world_size=plan.world_size,
        launcher=launcher,
        exit_code=exit_code,
        primary_metric=workload.primary_metric,
        metrics=metrics,
        fabric=fabric,
        counters=proof,
        gradient_bytes=gradient,
        bucket_cap_mb=s.bucket_cap_mb,
        bus_bandwidth=reading.bus_bandwidth,
        flops=_model_flops(reading.compute, plan, metrics.get(workload.primary_metric), config.device),
        findings=findings,
        valid=exit_code == 0 and fabric.valid and not any(f.severity == "error" for f in findings),
        breakdown=breakdown or None,
        pop=run_pop(breakdown, plan.world_size),
        cache_dropped=cache_dropped,
        telemetry_unknown=telemetry_unknown,
    )


def job_expectation(job: Job, workload: Workload) -> CounterExpectation | None:
    """What the proof by counters expects of ``job``'s nodes (its floors), from what ``workload``
    all-reduces with the job's settings: shown by `run --dry-run`, judged after the run."""
    return counter_expectation(workload.allreduce_volume(job.options.settings), len(job.hosts))


def _model_flops(
    facts: ComputeFacts | None, plan: Job, throughput: Metric | None, device: str
) -> ModelFlops | None:
    """The run's achieved FLOP/s and MFU; None without a FLOPs model or a positive throughput, or when
    the product overflows (a throughput that is no measurement: strict JSON could not hold it)."""
    if facts is None or throughput is None or not throughput.value > 0:
        return None
    flops = model_flops(
        facts, throughput.value, plan.world_size, gpu=device if plan.gpu else None, peaks=load_peaks()
    )
    return flops if math.isfinite(flops.achieved_tflops) else None


def checked_metrics(metrics: Mapping[str, Metric]) -> tuple[dict[str, Metric], list[Finding]]:
    """The metrics a record keeps, and an error finding for each figure that cannot be a measurement.

    A non-finite value (NaN, Infinity: a payload's broken division, or nothing strict JSON can hold) is
    left out of the record; a rate (a unit per second: img/s, GB/s) of zero or less is kept, so the
    record shows what was printed. Either makes the run invalid, so it never enters a median, a
    speedup or a prediction (a 0.00 GB/s busbw would divide by zero there).
    """
    kept: dict[str, Metric] = {}
    findings = []
    for name, metric in metrics.items():
        if not math.isfinite(metric.value):
            problem = f"is {metric.value}, not a finite number"
        elif metric.unit.endswith("/s") and metric.value <= 0:
            problem = f"is {metric.value:g} {metric.unit}; a rate of zero or less is no measurement"
        else:
            problem = None
        if math.isfinite(metric.value):
            kept[name] = metric
        if problem:
            findings.append(
                Finding(
                    severity="error",
                    code="bad-figure",
                    message=f"the output's {name} {problem}",
                    advice="read output.log in the run directory: the benchmark printed a broken figure; "
                    "the run is not counted",
                )
            )
    return kept, findings


# The line each rank prints before training (the payload's ranks.placement_line): its node, the GPU it
# uses, the GPUs Slurm's binding left it (its CPUs' socket's) and the CPUs it is bound to.
PLACEMENT_PREFIX = "CLUSTERCTL_PLACEMENT "


def placement_findings(output: str) -> list[Finding]:
    """Errors for a placement no run may have (pure): two ranks of a node on one GPU, or a rank whose GPU
    is not among those of its CPUs' socket. Read from every rank's placement line; a run without such
    lines (CPU ranks that no GPU was declared for) has nothing to judge here."""
    users: dict[tuple[str, str], list[int]] = {}
    findings = []
    for _, line in marker_values(output, PLACEMENT_PREFIX):  # glued or labelled lines too
        try:
            rank, node, gpu = int(line["rank"]), str(line["node"]), str(line["gpu"])
        except (ValueError, KeyError, TypeError):
            continue
        ranks = users.setdefault((node, str(line.get("uuid") or gpu)), [])
        if rank not in ranks:
            ranks.append(rank)
        near = line.get("near")
        if isinstance(near, list) and gpu not in [str(n) for n in near]:
            findings.append(
                Finding(
                    severity="error",
                    code="gpu-far",
                    node=node,
                    message=f"rank {rank} on {node} uses GPU {gpu}, not one of its CPUs' socket "
                    f"({','.join(map(str, near))}; CPUs {line.get('cpus')})",
                    advice="its memory traffic crosses sockets: bind ranks with --cpu-bind=cores "
                    "--gpu-bind=closest and let each rank take its GPU by its place on its socket",
                )
            )
    for (node, gpu), ranks in users.items():
        if len(ranks) > 1:
            findings.append(
                Finding(
                    severity="error",
                    code="gpu-shared",
                    node=node,
                    message=f"ranks {', '.join(map(str, sorted(ranks)))} on {node} all use GPU {gpu}",
                    advice="NCCL refuses two ranks on one GPU (Duplicate GPU detected) and one GPU "
                    "computing for two ranks halves both: run one rank per GPU (--ranks-per-node at most "
                    "the node's GPUs)",
                )
            )
    return findings


def _exit_findings(output: str, exit_code: int, plan: Job, starter: str) -> list[Finding]:
    if exit_code == 0:
        return []
    error = parse_mpi_error(output)
    summary = error.summary or "no MPI error block in the output"
    for host in plan.hosts:  # mpirun names hosts by the address in -H: say which node that is
        summary = re.sub(
            rf"(?<![\w.]){re.escape(host.address)}(?![\w.])", f"{host.node} ({host.address})", summary
        )
    return [
        Finding(
            severity="error",
            code="run-failed",
            message=f"{starter} exited {exit_code} ({error.category}): {summary}",
            advice="read output.log in the run directory; `clusterctl check` probes the nodes",
        )
    ]
