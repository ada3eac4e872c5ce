"""The payload's per-step breakdown, one ``CLUSTERCTL_BREAKDOWN {json}`` line per rank, read from a run's log.

The payload (``clusterctl/payload/steptimer.py``) cuts every measured step into consecutive phases
(input, forward, backward, exposed communication, optimizer) and prints, on every rank, each phase's
median, p10, p90 and mean in ms. This module reads those lines back as ``RankBreakdown`` models. A
line that is not one (garbled, cut off by a crash, an older payload's) is skipped: a run without a
breakdown has none, never an error.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clusterctl.diagnostics.model import marker_values

BREAKDOWN_PREFIX = "CLUSTERCTL_BREAKDOWN "


class PhaseStats(BaseModel):
    """One phase's (or the whole step's) time over a rank's measured steps, in ms."""

    model_config = ConfigDict(frozen=True)

    median: float = Field(ge=0)
    p10: float = Field(ge=0)
    p90: float = Field(ge=0)
    mean: float = Field(
        ge=0, description="Sums across phases to the step's mean (the phases tile each step)."
    )

    @field_validator("median", "p10", "p90", "mean")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value


class Phases(BaseModel):
    """The phases of a step, in the order they happen; None: the payload measured none of it."""

    model_config = ConfigDict(frozen=True)

    input: PhaseStats | None = Field(
        description="Obtaining the batch (synthetic data: already on the device)."
    )
    forward: PhaseStats | None = Field(description="zero_grad, the forward pass and the loss.")
    backward: PhaseStats | None = Field(description="The backward pass up to the last gradient computed.")
    exposed_comm: PhaseStats | None = Field(
        description="Blocked on the gradient allreduce after the last gradient: Horovod's synchronize(), "
        "DDP's wait at the end of backward() after its last bucket was ready."
    )
    optimizer: PhaseStats | None = Field(description="The optimizer step on the all-reduced gradients.")


class RankBreakdown(BaseModel):
    """One rank's per-step breakdown, as it printed it."""

    model_config = ConfigDict(frozen=True)

    rank: int = Field(ge=0)
    host: str = Field(description="The rank's host name (inside its container).")
    clock: str = Field(description="'wall' (time.perf_counter, CPUs) or 'cuda-events' (GPUs).")
    steps: int = Field(ge=1, description="Measured steps.")
    seconds: float | None = Field(
        None, ge=0, description="The rank's wall time over all its measured steps (window edges)."
    )
    phases_ms: Phases
    step_ms: PhaseStats

    @property
    def useful_ms(self) -> float | None:
        """Mean useful compute per step (forward + backward + optimizer), None when a part is missing."""
        parts = (self.phases_ms.forward, self.phases_ms.backward, self.phases_ms.optimizer)
        return None if any(p is None for p in parts) else sum(p.mean for p in parts if p is not None)


def parse_breakdown(log: str) -> list[RankBreakdown]:
    """Every rank's breakdown line in ``log`` (tagged or not, wherever it sits in a line:
    ``marker_values``), by rank; the last line wins for a rank."""
    found: dict[int, RankBreakdown] = {}
    for _, value in marker_values(log, BREAKDOWN_PREFIX):
        try:
            breakdown = RankBreakdown.model_validate(value)
        except ValidationError:
            continue
        found[breakdown.rank] = breakdown
    return [found[rank] for rank in sorted(found)]
