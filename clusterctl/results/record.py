"""The run record: one judged run (``RunRecord``) and the file it lives in, ``result.json``.

A run directory (``runs/<UTC time>_<workload>_<nodes>n/``) is a contract:

- ``spec.json``    the run options, the hosts and slots, the inventory file and image profile
- ``command.txt``  what was run: the exact mpirun command, shell-quoted, or the slurm batch script
- ``output.log``   the raw output of mpirun or of the job (every rank, tagged)
- ``topology/``    the topology snapshot bundle taken before the run, when one was (and a slurm
  job's snapshot after it in ``topology-after/``)
- ``telemetry/``   each node's samples during the run, ``<node>.jsonl`` (``clusterctl.results.telemetry``)
- ``trace/``       with ``run --trace``: a Horovod timeline or each rank's torch.profiler trace
- ``result.json``  this module's ``RunRecord``: metrics, findings, fabric proof, validity

The run stage judges a run and writes its directory (``clusterctl.run.judge``,
``clusterctl.run.rundir``); ``result.json`` is derived from the other files: ``judge_run`` over
``output.log`` rebuilds it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from clusterctl.findings import Finding
from clusterctl.readfile import read_bounded
from clusterctl.results.counters import CounterProof
from clusterctl.results.mfu import ModelFlops
from clusterctl.results.nccl_log_proof import FabricProof
from clusterctl.results.pop import PopMetrics
from clusterctl.workloads.base import Metric
from clusterctl.workloads.breakdown import RankBreakdown

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory

RESULT_FILE = "result.json"
# A record holds a few KB (a breakdown per rank: tens of KB for thousands of ranks); a larger file is no
# record clusterctl wrote, and is never read whole.
MAX_RECORD_BYTES = 64 << 20

LauncherName = Literal["ssh", "slurm"]
"""What started a run: ``ssh`` (mpirun in the primary's container) or ``slurm`` (sbatch + srun)."""
LAUNCHERS: tuple[LauncherName, ...] = ("ssh", "slurm")
# Exit code recorded for a run killed at its timeout (what coreutils' timeout uses).
TIMEOUT_EXIT_CODE = 124


def run_device(inventory: Inventory) -> str:
    """``RunConfig.device`` for a run on ``inventory``'s nodes: the GPU model, or ``cpu`` with the nodes'
    cpuset size when set (the inventory keeps the nodes alike: its primary's)."""
    primary = inventory.primary
    if primary.gpus.count > 0:
        return primary.gpus.model or "gpu"
    return "cpu" if primary.cpu_count is None else f"cpu ({primary.cpu_count}-core nodes)"


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
    model_size: str | None = Field(None, description="gpt: the model's size (tiny, 124m...); None: others.")
    seq_len: int | None = Field(None, description="gpt: tokens per sequence; None: other workloads.")
    activation_checkpointing: bool | None = Field(
        None, description="gpt: whether each block's activations were recomputed in backward; None: others."
    )
    collective: str | None = Field(
        None,
        description="allreduce, nccl-tests: allgather or reducescatter; None: allreduce (older records).",
    )
    data: str = Field(
        "synthetic",
        description="What was fed: synthetic tensors, real (images read from run.data), or real-loader (the "
        "input pipeline alone, no model); older records: synthetic.",
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
    flops: ModelFlops | None = Field(
        None,
        description="Achieved FLOP/s and model FLOPs utilisation (MFU) against the device's peak; None for a "
        "workload without a FLOPs model (collectives), a run without a throughput, and older records.",
    )
    findings: list[Finding]
    valid: bool = Field(description="Exit 0, sane output, fabric as the inventory says (log and counters).")
    # The per-step breakdown (issue 22 items 1-2).
    breakdown: list[RankBreakdown] | None = Field(
        None,
        description="Each rank's per-step phases (input, forward, backward, exposed communication, "
        "optimizer: median/p10/p90/mean ms) and host, by rank; None: the output has none (another "
        "workload, an older payload, every rank crashed).",
    )
    cache_dropped: bool = Field(
        False, description="Whether every node's page cache was dropped before the run (run --drop-caches)."
    )
    pop: PopMetrics | None = Field(
        None,
        description="Load balance, communication and parallel efficiency from the breakdown; None "
        "unless every rank printed one.",
    )
    # Node telemetry (issue 22 item 3).
    telemetry_unknown: dict[str, list[str]] | None = Field(
        None,
        description="Per node, what its telemetry could not say: 'sampler: <why>' when the sampler did not "
        "start, printed something else or lost samples, then each source null in every sample (cpu, memory, "
        "load, net, storage.disk, storage.nfs, gpus); nodes with everything known are absent. None: no "
        "sampler was run (older records).",
    )

    @property
    def value(self) -> float | None:
        """The primary metric's value, None when the run printed none."""
        metric = self.metrics.get(self.primary_metric)
        return metric.value if metric else None


def read_record_bytes(path: Path) -> bytes:
    """The bytes of a ``result.json``: a regular file (a FIFO or device is refused, never read), of at
    most ``MAX_RECORD_BYTES``.

    Raises:
        ValueError: it is not a regular file, or is larger than the limit (``readfile.NotAFile``).
        OSError: it cannot be read.
    """
    return read_bounded(path, MAX_RECORD_BYTES)


def read_record(directory: Path) -> RunRecord:
    """The ``RunRecord`` in a run directory's result.json.

    Raises:
        ValueError: as ``read_record_bytes``, or it holds no valid record (a ValidationError).
        OSError: it cannot be read.
    """
    return RunRecord.model_validate_json(read_record_bytes(directory / RESULT_FILE))
