"""What the diagnosis reads (``RunFacts``: one run's record, its nodes' telemetry, the preflight's
allreduce figures, the useful compute of its configuration's smallest run, the other runs of its
configuration) and what it says (``Diagnosis``: one rule's answer). Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from clusterctl.findings import Finding
from clusterctl.results.pop import Scaling, ScalingReference, mean_useful_ms, scaling_of
from clusterctl.results.record import RunRecord
from clusterctl.results.step import StepParts, step_parts
from clusterctl.results.telemetry import Sample
from clusterctl.workloads.breakdown import RankBreakdown

Status = Literal["found", "clear", "unknown"]
"""found: the rule's bottleneck is there; clear: the evidence rules it out; unknown: evidence is missing."""

Evidence = dict[str, float | int | str | None]


class Diagnosis(Finding):
    """One rule's answer on one run: a ``Finding`` (stable code, severity, message, advice, node) with
    whether it was found, and the numbers it was decided on."""

    status: Status
    evidence: Evidence = Field(default_factory=dict, description="The figures the rule decided on.")


@dataclass(frozen=True)
class PeerRun:
    """One run of the same configuration (workload settings, world size, launcher) as the explained run,
    itself included: its record, and its nodes' telemetry where it was read (the fastest and the slowest
    run's; empty otherwise)."""

    record: RunRecord
    telemetry: Mapping[str, Sequence[Sample]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFacts:
    """Everything the rules read about one run; a missing fact is None or empty, never a guess."""

    record: RunRecord
    telemetry: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    bus_bandwidth_gb_s: float | None = None
    allreduce_s: float | None = None
    """The whole gradient allreduce of one step at the preflight's bus bandwidth (the prediction's
    ``allreduce_s``); None without a matching collective run."""
    reference: ScalingReference | None = None
    """The useful compute per step of the smallest report row of the run's configuration (its report
    row's ``scaling_reference``); None without one."""
    peers: Sequence[PeerRun] = ()
    """The valid runs with a number of the run's configuration (report row), the run among them; empty:
    not read (the report's verdict column reads none)."""
    selection: str | None = None
    """Which run this is and why, when `explain` chose it (no RUN given); None: the user named it."""

    @property
    def breakdown(self) -> list[RankBreakdown]:
        """The run's per-rank breakdown (empty: none recorded)."""
        return list(self.record.breakdown or [])

    @property
    def parts(self) -> StepParts | None:
        """The run's step as its breakdown measured it (``clusterctl.results.step``, the model the
        report's row reads too); None without a breakdown."""
        return step_parts(self.breakdown)

    @property
    def scaling(self) -> Scaling | None:
        """The run's computation scalability and global efficiency against ``reference``; None without
        a reference smaller than the run (a run at the reference's size is compared with nothing)."""
        ref = self.reference
        if ref is None or ref.devices >= self.record.world_size:
            return None
        pe = self.record.pop.parallel_efficiency if self.record.pop else None
        return scaling_of(ref, mean_useful_ms(self.breakdown), pe)

    def node_of(self, host: str) -> str:
        """The telemetry's node name for a rank's host name: the same name, or its first label; the host
        name itself when no telemetry file matches."""
        for name in (host, host.split(".")[0]):
            if name in self.telemetry:
                return name
        return host


def unknown(code: str, why: str, **evidence: float | int | str | None) -> Diagnosis:
    """A rule's answer when its evidence is missing: ``why`` says which."""
    return Diagnosis(
        status="unknown", severity="info", code=code, message=f"unknown: {why}", evidence=evidence
    )


def decided(
    found: bool, code: str, *, message: str, evidence: Evidence, advice: str = "", node: str | None = None
) -> Diagnosis:
    """A rule's answer when its evidence decides: found (a warning, with ``advice``) or clear (info,
    no advice)."""
    return Diagnosis(
        status="found" if found else "clear",
        severity="warning" if found else "info",
        code=code,
        message=message,
        advice=advice if found else "",
        node=node,
        evidence=evidence,
    )


def share(part: float, whole: float) -> float | None:
    """``part / whole``, None for no whole."""
    return part / whole if whole > 0 else None


def mean_or_none(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are there, None when none is."""
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None
