"""The explanation of one run: its verdict, its phases per node, POP and MFU, and every rule's answer;
what `clusterctl explain --json` prints and the screen is drawn from. Pure."""

from __future__ import annotations

import statistics
from collections import defaultdict

from pydantic import BaseModel, Field

from clusterctl.explain.model import Diagnosis, RunFacts
from clusterctl.explain.rules import diagnose
from clusterctl.explain.verdict import Verdict, verdict
from clusterctl.results.mfu import ModelFlops
from clusterctl.results.pop import PopMetrics, Scaling
from clusterctl.results.step import PHASES
from clusterctl.workloads.breakdown import RankBreakdown


class NodePhases(BaseModel):
    """One host's ranks: each phase's mean per step (ms), averaged over its ranks (None: not measured)."""

    host: str
    ranks: list[int]
    phases_ms: dict[str, float | None] = Field(description="Phase name to mean ms per step.")
    step_ms: float
    useful_ms: float | None = Field(description="forward + backward + optimizer.")


class Explanation(BaseModel):
    """One run explained."""

    run_id: str
    selection: str | None = Field(
        None, description="Which run this is and why, when explain chose it; None: the run was named."
    )
    valid: bool
    workload: str
    framework: str
    nodes: int
    world_size: int
    throughput: str | None = Field(description="The primary metric, with its unit.")
    verdict: Verdict
    phases: list[NodePhases] = Field(description="Per host, in the order of its first rank.")
    pop: PopMetrics | None
    scaling: Scaling | None = Field(
        description="Computation scalability and global efficiency against the configuration's smallest "
        "run in the runs directory; None: no smaller run with a figure."
    )
    flops: ModelFlops | None
    bus_bandwidth_gb_s: float | None = Field(description="The preflight's bus bandwidth; None: no preflight.")
    telemetry_nodes: list[str] = Field(description="Nodes with telemetry recorded.")
    diagnoses: list[Diagnosis]


def _mean(values: list[float | None]) -> float | None:
    return None if not values or None in values else statistics.fmean(v for v in values if v is not None)


def node_phases(breakdown: list[RankBreakdown]) -> list[NodePhases]:
    """The breakdown per host (its ranks' means), hosts in the order of their first rank."""
    by_host: dict[str, list[RankBreakdown]] = defaultdict(list)
    for b in sorted(breakdown, key=lambda b: b.rank):
        by_host[b.host].append(b)
    return [
        NodePhases(
            host=host,
            ranks=[b.rank for b in ranks],
            phases_ms={
                name: _mean([p.mean if (p := getattr(b.phases_ms, name)) else None for b in ranks])
                for name in PHASES
            },
            step_ms=statistics.fmean(b.step_ms.mean for b in ranks),
            useful_ms=_mean([b.useful_ms for b in ranks]),
        )
        for host, ranks in by_host.items()
    ]


def explain(facts: RunFacts) -> Explanation:
    """Run every rule on ``facts`` and put the answer together."""
    record = facts.record
    diagnoses = diagnose(facts)
    metric = record.metrics.get(record.primary_metric)
    return Explanation(
        run_id=record.run_id,
        selection=facts.selection,
        valid=record.valid,
        workload=record.config.workload,
        framework=record.config.framework,
        nodes=record.nodes,
        world_size=record.world_size,
        throughput=f"{metric.value:,.2f} {metric.unit}" if metric else None,
        verdict=verdict(facts, diagnoses),
        phases=node_phases(facts.breakdown),
        pop=record.pop,
        scaling=facts.scaling,
        flops=record.flops,
        bus_bandwidth_gb_s=facts.bus_bandwidth_gb_s,
        telemetry_nodes=sorted(name for name, samples in facts.telemetry.items() if samples),
        diagnoses=diagnoses,
    )
