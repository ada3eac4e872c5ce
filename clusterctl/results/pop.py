"""POP metrics of one run from its per-rank breakdown: the multiplicative model of the POP Centre of
Excellence, as the RWTH Aachen Horovod ResNet-50 case study used it. Pure.

With U_r a rank's useful compute per step (forward + backward + optimizer: neither waiting for input
nor exposed communication) and T the step time (the slowest rank's mean step, which tiles into those
phases):

- load balance            LB = mean_r U_r / max_r U_r
- communication efficiency CommE = max_r U_r / T
- parallel efficiency      PE = LB x CommE = mean_r U_r / T

The study reports 64 GPUs as 0.34 = 0.99 x 0.33; the product of those two rounded figures is 0.3267
(0.33), so its factors were truncated, not rounded (e.g. 0.999 x 0.339 = 0.3387: 0.34).

Across runs of one configuration at growing device counts (the batch per device fixed: weak scaling),
POP's computation scalability CS compares the useful compute with a reference run's and global
efficiency GE = PE x CS (https://co-design.pop-coe.eu/metrics/computation_efficiency.html and
global_efficiency.html: strong scaling divides the total useful compute summed over processes; with the
work per process fixed that total grows with the process count, so weak scaling's CS is the ratio of
the per-rank means): CS = U_ref / mean_r U_r. Each rank doing the same work slower as the device count
grows (compute and communication sharing a core, clocks, memory bandwidth) gives CS < 1.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.workloads.breakdown import RankBreakdown


class PopMetrics(BaseModel):
    """One run's POP efficiencies (fractions, 1.0 ideal)."""

    model_config = ConfigDict(frozen=True)

    load_balance: float = Field(description="Mean over ranks of useful compute / its maximum.")
    communication_efficiency: float = Field(description="Maximum useful compute / step time.")
    parallel_efficiency: float = Field(description="load_balance x communication_efficiency.")
    ranks: int = Field(ge=1, description="Ranks the figures are over.")


def pop_metrics(useful: Sequence[float], step_time: float) -> PopMetrics | None:
    """LB, CommE and PE from each rank's useful compute and the step time (any one unit); None when the
    figures cannot be measurements (none, negative, not finite, no compute or no time)."""
    figures = [*useful, step_time]
    if (
        not useful
        or not all(math.isfinite(x) and x >= 0 for x in figures)
        or max(useful) == 0
        or step_time == 0
    ):
        return None
    load_balance = statistics.fmean(useful) / max(useful)
    communication = max(useful) / step_time
    return PopMetrics(
        load_balance=load_balance,
        communication_efficiency=communication,
        parallel_efficiency=load_balance * communication,
        ranks=len(useful),
    )


def run_pop(breakdown: Sequence[RankBreakdown], world_size: int) -> PopMetrics | None:
    """The POP metrics of a run whose every rank (``world_size`` of them) printed its breakdown; None
    otherwise (a crashed rank, an older payload): LB over some of the ranks would be no LB."""
    if len(breakdown) != world_size or {b.rank for b in breakdown} != set(range(world_size)):
        return None
    useful = [b.useful_ms for b in breakdown]
    if any(u is None for u in useful):
        return None
    return pop_metrics([u for u in useful if u is not None], max(b.step_ms.mean for b in breakdown))


class ScalingReference(BaseModel):
    """What computation scalability divides by: the useful compute per step of a configuration's
    smallest row."""

    model_config = ConfigDict(frozen=True)

    devices: int = Field(ge=1, description="The reference row's device count.")
    compute_ms: float = Field(gt=0, description="Its useful compute per step, ms (mean over ranks).")
    source: Literal["breakdown", "rate"] = Field(
        description="breakdown: its runs' per-step breakdown; rate: no breakdown recorded, so its whole "
        "step (batch / per-device rate), an upper bound of its compute."
    )


class Scaling(BaseModel):
    """Computation scalability and global efficiency of a run or a report row."""

    model_config = ConfigDict(frozen=True)

    computation_scalability: float = Field(description="Reference useful compute / this one's, per step.")
    global_efficiency: float | None = Field(description="parallel efficiency x computation scalability.")
    compute_ms: float = Field(description="This run's (row's) useful compute per step, ms (mean over ranks).")
    reference: ScalingReference


def mean_useful_ms(breakdown: Sequence[RankBreakdown]) -> float | None:
    """The mean over ranks of the useful compute per step (ms); None without a figure for every rank."""
    useful = [b.useful_ms for b in breakdown]
    if not useful or None in useful:
        return None
    return statistics.fmean(u for u in useful if u is not None)


def scaling_of(
    reference: ScalingReference | None, compute_ms: float | None, parallel_efficiency: float | None
) -> Scaling | None:
    """CS and GE of a useful compute per step against ``reference``; None without both figures, or
    with a compute that is no measurement (not finite, zero or less)."""
    if reference is None or compute_ms is None or not (math.isfinite(compute_ms) and compute_ms > 0):
        return None
    scalability = reference.compute_ms / compute_ms
    return Scaling(
        computation_scalability=scalability,
        global_efficiency=None if parallel_efficiency is None else parallel_efficiency * scalability,
        compute_ms=compute_ms,
        reference=reference,
    )
