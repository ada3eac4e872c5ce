"""Run records: one run judged (metrics, sanity, fabric) and written to its run directory.

A run directory (``runs/<UTC time>_<workload>_<nodes>n/``) is a contract:

- ``spec.json``    the run options, the hosts and slots, the inventory file and image profile
- ``command.txt``  what was run: the exact mpirun command, shell-quoted, or the slurm batch script
- ``output.log``   the raw output of mpirun or of the job (every rank, tagged)
- ``topology/``    the topology snapshot bundle taken before the run, when one was (and a slurm
  job's snapshot after it in ``topology-after/``)
- ``result.json``  this module's ``RunRecord``: metrics, findings, fabric proof, validity

``result.json`` is derived from the other files: ``judge_run`` over ``output.log`` rebuilds it.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from clusterctl.diagnostics.bundle import NodeBundle, write_bundle
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters
from clusterctl.diagnostics.parsers.mpi_error import parse_mpi_error
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory
from clusterctl.results.counters import (
    CounterProof,
    counter_findings,
    expected_bytes_per_node,
    prove_counters,
)
from clusterctl.results.fabric import FabricProof, fabric_findings, prove_fabric, settle_snapshot
from clusterctl.run.launchers import LauncherName
from clusterctl.run.plan import LaunchPlan
from clusterctl.workloads.base import Metric, Workload

RESULT_FILE = "result.json"


class RunConfig(BaseModel):
    """What makes two runs comparable; the report groups by it."""

    workload: str
    model: str
    framework: str
    precision: str
    batch_size: int
    image_size: int
    image_profile: str
    device: str = Field(
        description="GPU model, or 'cpu'; with the nodes' cpuset size when set, e.g. 'cpu (1-core nodes)': "
        "runs on nodes of other sizes are not comparable."
    )


class RunRecord(BaseModel):
    """One run, judged."""

    run_id: str = Field(description="The run directory's name.")
    started_at: datetime
    config: RunConfig
    nodes: int = Field(ge=1)
    world_size: int = Field(ge=1, description="Ranks of the run; a speedup and an efficiency divide by it.")
    launcher: LauncherName = Field(
        "ssh", description="What started the run: ssh (mpirun) or slurm (sbatch + srun); older records: ssh."
    )
    exit_code: int
    primary_metric: str
    metrics: dict[str, Metric]
    fabric: FabricProof
    counters: CounterProof | None = Field(
        None, description="Bytes each node's fabric moved during the run; None when not read."
    )
    gradient_bytes: int | None = Field(
        None, description="Bytes each rank all-reduced per step; None for a workload that trains nothing."
    )
    bucket_cap_mb: float = Field(
        25.0, description="DDP's bucket size the run used (MB); the prediction's fused size."
    )
    bus_bandwidth: dict[int, float] = Field(
        default_factory=dict,
        description="A collective run's out-of-place bus bandwidth (GB/s) per message size (bytes); the "
        "prediction reads it at the framework's bucket/fusion size.",
    )
    findings: list[Finding]
    valid: bool = Field(description="Exit 0, sane output, fabric as the inventory says (log and counters).")

    @property
    def value(self) -> float | None:
        """The primary metric's value, None when the run printed none."""
        metric = self.metrics.get(self.primary_metric)
        return metric.value if metric else None


def _cpu_device(cores: int | None) -> str:
    return "cpu" if cores is None else f"cpu ({cores}-core nodes)"


def judge_run(
    inventory: Inventory,
    plan: LaunchPlan,
    workload: Workload,
    output: str,
    exit_code: int,
    *,
    run_id: str,
    started_at: datetime,
    counters: tuple[dict[str, NodeCounters], dict[str, NodeCounters]] | None = None,
    snapshot: Sequence[Finding] = (),
    launcher: LauncherName = "ssh",
) -> RunRecord:
    """Judge one run's raw output: its metrics, sanity findings and fabric proof. Pure.

    ``counters``: the nodes' fabric counters read before and after the run, when they were.
    ``snapshot``: the findings of the run's topology snapshot; its peer-memory ones join the run's
    findings as the run's NCCL log settles them (``settle_snapshot``). ``launcher``: what started
    the run.
    """
    s = plan.options.settings
    primary = inventory.primary
    config = RunConfig(
        workload=workload.name,
        model=workload.model,
        framework=s.framework,
        precision=s.precision,
        batch_size=s.batch_size,
        image_size=s.image_size,
        image_profile=inventory.image.profile,
        device=(primary.gpus.model or "gpu") if plan.gpu else _cpu_device(primary.cpu_count),
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
        volume = workload.allreduce_volume(s)
        proof = prove_counters(
            *counters,
            fabric=primary.fabric,
            expected_bytes_per_node=None
            if volume is None
            else expected_bytes_per_node(volume.bytes, len(plan.hosts)),
            in_network=fabric.in_network,
            # NCCL's gradients must go over verbs; CPU ranks' Gloo/MPI use TCP on the fabric by design.
            rdma_only=plan.gpu and primary.rdma,
        )
    metrics, figure_problems = checked_metrics(workload.metrics(output))
    findings = [
        *_exit_findings(output, exit_code, plan, launcher),
        *figure_problems,
        *workload.sanity(output, plan),
        *fabric_findings(fabric),
        *settle_snapshot(snapshot, fabric),
        *(counter_findings(proof) if proof else ()),
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
        bus_bandwidth=workload.bus_bandwidth_by_size(output),
        findings=findings,
        valid=exit_code == 0 and fabric.valid and not any(f.severity == "error" for f in findings),
    )


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


# What the run's exit code is the exit code of, per launcher.
_STARTER: dict[LauncherName, str] = {"ssh": "mpirun", "slurm": "the Slurm job"}


def _exit_findings(output: str, exit_code: int, plan: LaunchPlan, launcher: LauncherName) -> list[Finding]:
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
            message=f"{_STARTER[launcher]} exited {exit_code} ({error.category}): {summary}",
            advice="read output.log in the run directory; `clusterctl check` probes the nodes",
        )
    ]


def new_run_id(workload: str, nodes: int, now: datetime | None = None) -> str:
    """``<UTC time>_<workload>_<nodes>n``, e.g. ``20250101T120000Z_resnet50_2n``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}_{workload}_{nodes}n"


def write_run_dir(
    runs_dir: Path,
    inventory: Inventory,
    plan: LaunchPlan,
    output: str,
    record: RunRecord,
    topology_dir: Path | None = None,
    *,
    command: str | None = None,
    bundles: Mapping[str, Mapping[str, NodeBundle]] | None = None,
) -> Path:
    """Write the run directory for ``record`` under ``runs_dir`` and return its path.

    ``command``: what ran (None: the plan's mpirun command); ``bundles``: snapshots the launch took,
    by folder name (``topology``, ``topology-after``), written instead of copying ``topology_dir``.
    A second run in the same second gets a ``-2``, ``-3``... suffix; nothing is overwritten. The
    record's ``run_id`` is updated to the directory's name.
    """
    runs_dir.mkdir(parents=True, exist_ok=True)
    directory = runs_dir / record.run_id
    n = 1
    while True:
        try:
            directory.mkdir()
            break
        except FileExistsError:
            n += 1
            directory = runs_dir / f"{record.run_id}-{n}"
    record.run_id = directory.name
    spec = {
        "options": plan.options.model_dump(mode="json"),
        "hosts": [h.model_dump() for h in plan.hosts],
        "env": plan.env,
        "inventory": str(inventory.source) if inventory.source else None,
        "cluster": inventory.cluster.name,
        "image": inventory.image.model_dump(mode="json"),
    }
    (directory / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    (directory / "command.txt").write_text((command or plan.shell_command()).rstrip("\n") + "\n")
    (directory / "output.log").write_text(output)
    if topology_dir is not None and not bundles:
        shutil.copytree(topology_dir, directory / "topology")
    for folder, by_node in (bundles or {}).items():
        write_bundle(directory / folder, by_node)
    (directory / RESULT_FILE).write_text(record.model_dump_json(indent=2) + "\n")
    return directory


def read_record(directory: Path) -> RunRecord:
    """The ``RunRecord`` in a run directory's result.json."""
    return RunRecord.model_validate_json((directory / RESULT_FILE).read_text())
