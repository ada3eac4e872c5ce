"""Run records with a per-step breakdown, for the tests of `explain`, the report and the step story: the
real breakdowns of recorded runs (tests/fixtures/breakdown, tests/fixtures/explain), a real old record
given one, and telemetry samples built from the ``Sample`` model."""

from __future__ import annotations

from pathlib import Path

from clusterctl.results.pop import run_pop
from clusterctl.results.record import RunRecord, read_record
from clusterctl.results.telemetry import CpuSample, GpuSample, Sample
from clusterctl.workloads.breakdown import PhaseStats, RankBreakdown, parse_breakdown

FIXTURES = Path(__file__).parents[1] / "fixtures"
# A real run directory of a 2-node sandbox run from before the breakdown existed (fixtures/runs/README.md).
OLD_RUN = FIXTURES / "runs" / "20261125T170753Z_resnet50_2n"
DDP = parse_breakdown((FIXTURES / "breakdown" / "ddp-2ranks.log").read_text())
HOROVOD = parse_breakdown((FIXTURES / "breakdown" / "horovod-2ranks.log").read_text())
THROTTLED = parse_breakdown((FIXTURES / "explain" / "straggler-2nodes.log").read_text())
GRADIENT_BYTES = 102_228_128  # ResNet-50's fp32 gradients


def breakdown_record(breakdown: list[RankBreakdown], *, framework: str = "ddp", nodes: int = 2) -> RunRecord:
    """The real old record with ``breakdown`` in it, as a run of its ranks would have recorded it."""
    old = read_record(OLD_RUN)
    return old.model_copy(
        update={
            "breakdown": breakdown,
            "pop": run_pop(breakdown, len(breakdown)),
            "world_size": len(breakdown),
            "nodes": nodes,
            "gradient_bytes": GRADIENT_BYTES,
            "config": old.config.model_copy(update={"framework": framework, "batch_size": 2}),
        }
    )


def cpu_samples(util: float, steal: float = 0.0, n: int = 5) -> list[Sample]:
    return [Sample(t=1000.0 + i, cpu=CpuSample(util=util, steal=steal, iowait=0.0)) for i in range(n)]


def with_phase(b: RankBreakdown, name: str, mean: float) -> RankBreakdown:
    """``b`` with phase ``name``'s mean set to ``mean`` and the step grown by the difference (hand numbers)."""
    old = getattr(b.phases_ms, name)
    stats = PhaseStats(median=mean, p10=mean, p90=mean, mean=mean)
    step = b.step_ms.mean - old.mean + mean
    return b.model_copy(
        update={
            "phases_ms": b.phases_ms.model_copy(update={name: stats}),
            "step_ms": PhaseStats(median=step, p10=step, p90=step, mean=step),
        }
    )


def gpu_samples(utils: list[float]) -> list[Sample]:
    return [Sample(t=1000.0 + i, gpus=[GpuSample(index=0, util=u)]) for i, u in enumerate(utils)]
