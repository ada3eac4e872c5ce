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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

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
