"""One model of a training step, read by the prediction, the report's sentence and verdict column and
`explain`'s rules alike: where one run's step time goes. Pure.

A data-parallel step on a rank is input (waiting for the batch), useful compute (forward + backward +
optimizer) and exposed communication (the part of the gradient exchange backward did not hide); the
payload's breakdown measures each (``RankBreakdown``) and the figures here are means over the ranks.
The whole exchange takes ``allreduce_s`` at the bus bandwidth the preflight measured (the prediction's
figure); what backward hid of it is ``allreduce_s`` minus the exposed wait.

Compute is this configuration's own, measured, when the run recorded a breakdown: a rank that shares its
node with communication computes slower than on 1 device (the quickstart's 2-node ranks took 2.7x as
long), so the 1-device step (batch / 1-device rate) is used only for a run without a breakdown, and
then nothing here names a cause.

Which part limits a run is `explain`'s verdict (``clusterctl.explain.verdict``: the first rule found,
rules reading these same figures and the thresholds below); ``LIMITS`` says each verdict in words, so
the report's sentence names the cause its verdict column shows, and nothing else.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.workloads.breakdown import RankBreakdown

# The phases a step is cut into, in the order they happen (``clusterctl.workloads.breakdown.Phases``).
PHASES = ("input", "forward", "backward", "exposed_comm", "optimizer")
INPUT_SHARE = 0.10  # a step waiting a tenth of its time on its batch is input-bound
COMM_SHARE = 0.20  # a fifth of every step blocked on the allreduce: communication-bound
NOT_OVERLAPPED = 0.8  # exposed communication at least this share of the whole allreduce's time

COMMUNICATION_BOUND = "communication-bound"
# Each verdict code (`explain`'s rules, ``balanced``, ``unknown``) as the limit it names. Only
# communication-bound says the fabric is the limit: a test holds every rule's code to an entry here.
LIMITS: dict[str, str] = {
    "straggler": "the slowest node is the limit",
    "cpu-starved": "the nodes' CPUs are the limit",
    "compute-scaling": "the compute is the limit, not the fabric",
    COMMUNICATION_BOUND: "the fabric is the limit",
    "not-overlapped": "the exchange's overlap with backward is the limit",
    "input-bound": "the input pipeline is the limit",
    "gpu-idle": "feeding the GPUs is the limit",
    "rails": "an idle or unbalanced rail is the limit",
    "balanced": "no one part is the limit",
}
FABRIC_LIMIT = LIMITS[COMMUNICATION_BOUND]


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean of ``values``; None for none, or when one is missing (a rank without the figure)."""
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(v for v in values if v is not None)


class StepParts(BaseModel):
    """One run's step as its breakdown measured it: each part's mean per step over the ranks (ms) and its
    share of the step (the mean over ranks of each rank's share); None where a rank lacks the phase."""

    model_config = ConfigDict(frozen=True)

    step_ms: float = Field(description="The step (mean over ranks of each rank's mean step).")
    compute_ms: float | None = Field(description="Useful compute: forward + backward + optimizer.")
    input_ms: float | None = Field(description="Waiting for the batch.")
    exposed_ms: float | None = Field(
        description="Blocked on the gradient exchange after backward (mean over the ranks that have it)."
    )
    backward_ms: float | None = Field(description="The backward pass, during which the exchange starts.")
    input_share: float | None = Field(description="Input's share of the step.")
    exposed_share: float | None = Field(description="Exposed communication's share of the step.")


def _share(b: RankBreakdown, name: str) -> float | None:
    phase = getattr(b.phases_ms, name)
    return None if phase is None or b.step_ms.mean <= 0 else phase.mean / b.step_ms.mean


def step_parts(breakdown: Sequence[RankBreakdown]) -> StepParts | None:
    """The parts of a run's step from its per-rank breakdown; None without one."""
    if not breakdown:
        return None
    exposed = [b.phases_ms.exposed_comm.mean for b in breakdown if b.phases_ms.exposed_comm]
    return StepParts(
        step_ms=statistics.fmean(b.step_ms.mean for b in breakdown),
        compute_ms=_mean([b.useful_ms for b in breakdown]),
        input_ms=_mean([p.mean if (p := b.phases_ms.input) else None for b in breakdown]),
        exposed_ms=statistics.fmean(exposed) if exposed else None,
        backward_ms=_mean([p.mean if (p := b.phases_ms.backward) else None for b in breakdown]),
        input_share=_mean([_share(b, "input") for b in breakdown]),
        exposed_share=_mean([_share(b, "exposed_comm") for b in breakdown]),
    )


def hidden_share(exposed_s: float, allreduce_s: float) -> float:
    """The share of the whole exchange (``allreduce_s``) backward hid, given the exposed wait."""
    return max(0.0, 1 - exposed_s / allreduce_s)


class StepModel(BaseModel):
    """Where one run's step goes (``run_id``), with the whole exchange at the preflight's bandwidth: the
    figures the prediction, the report's sentence and `explain`'s rules share."""

    model_config = ConfigDict(frozen=True)

    run_id: str | None = Field(None, description="The run the measured parts are from; None: no run's.")
    compute_s: float = Field(description="Compute per step: measured (compute_source breakdown) or 1-device.")
    compute_source: Literal["breakdown", "single-device"] = Field(
        description="breakdown: this run's useful compute, mean over ranks; single-device: batch / the "
        "1-device rate (no breakdown recorded: compute slowed by sharing is not seen)."
    )
    single_device_s: float | None = Field(None, description="Batch / the 1-device rate, when known.")
    allreduce_s: float | None = Field(
        None, description="The whole gradient exchange at the preflight's bus bandwidth; None: no preflight."
    )
    bus_bandwidth_gb_s: float | None = Field(None, description="That bus bandwidth (GB/s).")
    parts: StepParts | None = Field(None, description="The run's measured parts; None: no breakdown.")

    @property
    def exposed_s(self) -> float | None:
        """The exposed wait per step (s); None without a breakdown phase."""
        return None if self.parts is None or self.parts.exposed_ms is None else self.parts.exposed_ms / 1e3

    @property
    def hidden(self) -> float | None:
        """The share of the whole exchange hidden behind backward; None without both figures."""
        exposed = self.exposed_s
        return None if exposed is None or not self.allreduce_s else hidden_share(exposed, self.allreduce_s)

    def figures(self) -> str:
        """The step in words: compute (and against the 1-device step), the exchange and how much of it
        was exposed, input."""
        words = [f"{self.compute_s:.3g} s of compute"]
        if self.compute_source == "single-device":
            words[0] += " at the 1-device rate (no breakdown recorded)"
        elif self.single_device_s:
            words[0] += (
                f" ({self.compute_s / self.single_device_s:.1f}x the 1-device {self.single_device_s:.3g} s)"
            )
        if self.allreduce_s is not None:
            exchange = f"{self.allreduce_s:.3g} s of allreduce"
            if self.bus_bandwidth_gb_s:
                exchange += f" at {self.bus_bandwidth_gb_s:.3g} GB/s"
            exposed, hidden = self.exposed_s, self.hidden
            if exposed is not None and hidden is not None:
                exchange += f", {1e3 * exposed:.0f} ms of it exposed ({100 * hidden:.0f}% hidden)"
            words.append(exchange)
        elif self.exposed_s is not None:
            words.append(f"{1e3 * self.exposed_s:.0f} ms of exposed allreduce")
        if self.parts is not None and self.parts.input_ms is not None:
            words.append(f"{self.parts.input_ms:.0f} ms of input")
        return ", ".join(words)


def limit_of(code: str | None) -> str | None:
    """The limit a verdict code names, in words; None for no verdict, ``unknown`` or a code without one."""
    return LIMITS.get(code) if code else None
