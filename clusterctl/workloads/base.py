"""What every workload is: its argv, how fast it ran (metrics) and whether it ran what was asked (sanity).

Sanity and metrics are separate questions (ReFrame's split): ``metrics(log)`` only reads numbers, each
with a unit; ``sanity(log, plan)`` returns findings when the output does not show the model, batch
size or world size that the plan asked for. Parsing is done by ``clusterctl.diagnostics.parsers``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.findings import Finding
from clusterctl.workloads.breakdown import RankBreakdown
from clusterctl.workloads.compute import ComputeFacts

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, Inventory, RunDefaults
    from clusterctl.workloads.job import Job


class Metric(BaseModel):
    """One measured number and its unit."""

    model_config = ConfigDict(frozen=True)

    value: float
    unit: str


class Volume(BaseModel):
    """What one rank all-reduces over a whole run, and how that number was derived."""

    model_config = ConfigDict(frozen=True)

    bytes: int = Field(description="Bytes each rank all-reduces over the run (warm-up included).")
    derivation: str = Field(
        description="The arithmetic, in words, e.g. '25,557,032 parameters x 4 B x 12 steps'."
    )


@dataclass(frozen=True)
class Reading:
    """What a workload reads in one run's output, read once: its metrics, its sanity findings, each
    rank's per-step breakdown, its compute facts (MFU) and a collective's bus bandwidth by size."""

    metrics: dict[str, Metric]
    sanity: list[Finding]
    breakdown: list[RankBreakdown]
    compute: ComputeFacts | None
    bus_bandwidth: dict[int, float]


class Workload(ABC):
    """A benchmark clusterctl can launch. Subclasses are stateless; the registry holds one of each."""

    name: ClassVar[str]
    model: ClassVar[str]
    primary_metric: ClassVar[str]
    description: ClassVar[str]
    # Reads run.data's TFRecord shards (<run.data>/tfrecords) rather than its JPEGs, unless run.data_dir.
    reads_tfrecords: ClassVar[bool] = False

    @abstractmethod
    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """The command every rank runs (after mpirun's own flags)."""

    @abstractmethod
    def image_lacks(self, versions: ImageVersions) -> str | None:
        """What an image built with ``versions`` lacks to run this workload (e.g. "PyTorch"); None: nothing."""

    @abstractmethod
    def metrics(self, log: str) -> dict[str, Metric]:
        """The numbers in ``log``; empty when the run printed none."""

    @abstractmethod
    def sanity(self, log: str, plan: Job) -> list[Finding]:
        """Findings when ``log`` does not show the run ``plan`` asked for."""

    def defaults(self, inventory: Inventory) -> dict[str, object]:
        """This workload's own run settings for ``inventory``'s devices (a model, batch or sequence that
        fits them), under what the inventory's ``run`` and ``workloads`` sections and the command line
        set (``Inventory.run_settings``); none by default: ``RunDefaults``' field defaults."""
        del inventory
        return {}

    def read(self, log: str, job: Job) -> Reading:
        """Everything this workload reads in ``log`` of ``job``, for the judgement; a workload whose
        readers share a parse (its result line) overrides it to parse once."""
        return Reading(
            self.metrics(log),
            self.sanity(log, job),
            self.breakdown(log),
            self.compute(job.options.settings, log),
            self.bus_bandwidth_by_size(log),
        )

    def gradient_bytes(self, settings: RunDefaults) -> int | None:
        """Bytes each rank all-reduces per training step with ``settings``; None: not a training workload.

        The proof by counters (``clusterctl.results.counters``) expects the fabric to carry at least
        2(N-1)/N times this per node and step.
        """
        del settings
        return None

    def allreduce_volume(self, settings: RunDefaults) -> Volume | None:
        """What each rank all-reduces over the run with ``settings``; None: the workload does not say.

        A training workload all-reduces its gradient bytes once per step, warm-up steps included;
        the proof by counters expects 2(N-1)/N times this per node.
        """
        gradient = self.gradient_bytes(settings)
        if gradient is None:
            return None
        steps = settings.warmup_steps + settings.steps
        return Volume(bytes=gradient * steps, derivation=f"{gradient:,} B of gradients x {steps} steps")

    def check_plan(self, inventory: Inventory, settings: RunDefaults, world_size: int) -> None:
        """Refuse, before anything runs, settings this workload cannot run on ``inventory`` (a model that
        cannot fit the devices); nothing by default.

        Raises:
            InputError: the settings cannot run; the message says why and what to change.
        """
        del inventory, settings, world_size

    def config_fields(self, settings: RunDefaults) -> dict[str, object]:
        """Settings besides the common ones that make two runs of this workload comparable (the record's
        ``RunConfig``, which the report groups by); none by default. A field given here replaces the
        common one (``model``: nccl-tests names the binary of its collective)."""
        del settings
        return {}

    def breakdown(self, log: str) -> list[RankBreakdown]:
        """Each rank's per-step breakdown printed in ``log``, by rank; empty when the workload prints none."""
        del log
        return []

    def compute(self, settings: RunDefaults, log: str) -> ComputeFacts | None:
        """The run's arithmetic for model FLOPs utilisation: FLOPs per sample, math precision, any peak
        the payload measured; None for a workload without a FLOPs model (collectives)."""
        del settings, log
        return None

    def bus_bandwidth_by_size(self, log: str) -> dict[int, float]:
        """A collective benchmark's bus bandwidth (GB/s) per message size (bytes); empty for others."""
        del log
        return {}

    def forwarded_env(self, inventory: Inventory) -> list[str]:
        """Extra variables of the launching shell mpirun must pass to the ranks (-x NAME)."""
        del inventory
        return []


def expect(code: str, seen: object, wanted: object, what: str) -> list[Finding]:
    """One error finding when ``seen`` (echoed in the output) differs from ``wanted`` (asked for)."""
    if seen == wanted:
        return []
    shown = "nothing" if seen is None else repr(seen)
    return [
        Finding(
            severity="error",
            code=code,
            message=f"the output shows {what} {shown}, the run asked for {wanted!r}",
            advice="check the command in command.txt and the raw log; the numbers are not for this configuration",
        )
    ]


def missing_result(workload: str, what: str) -> Finding:
    """The error finding for a run whose output lacks its result line."""
    return Finding(
        severity="error",
        code="no-result",
        message=f"{workload}: no {what} in the output",
        advice="read output.log in the run directory: the run failed or was stopped before the end",
    )
