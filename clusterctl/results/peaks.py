"""Datasheet dense peaks per GPU model and precision (``peaks.yml``), each sourced, and the one pure lookup.

A GPU matches an entry when one of its ``match`` substrings is in the GPU's name, in any case, as
baselines match GPU models (``baselines.gpu_matches``); an unknown GPU, or a precision the GPU lacks,
has no peak (None), never an error.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.results.baselines import gpu_matches
from clusterctl.workloads.compute import MathPrecision
from clusterctl.yamlio import load_yaml

DEFAULT_PEAKS = Path(__file__).with_name("peaks.yml")


class DevicePeak(BaseModel):
    """One GPU model's dense peaks by math precision (TFLOP/s), with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    match: list[str] = Field(min_length=1, description="Substrings of the GPU's name that identify it.")
    tflops: dict[MathPrecision, float] = Field(min_length=1, description="Dense peak per math precision.")
    source: str = Field(min_length=10, description="Where the figures were published.")

    def matches(self, gpu: str) -> bool:
        """Whether ``gpu`` (an inventory's gpus.model or nvidia-smi's name) is this model."""
        return any(gpu_matches(wanted, gpu) for wanted in self.match)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    peaks: list[DevicePeak]


def load_peaks(path: Path = DEFAULT_PEAKS) -> list[DevicePeak]:
    """The peaks in ``path`` (default: the shipped ``peaks.yml``)."""
    return _File.model_validate(load_yaml(path)).peaks


def find_peak(gpu: str, precision: MathPrecision, peaks: list[DevicePeak]) -> tuple[DevicePeak, float] | None:
    """The entry for ``gpu`` and its peak at ``precision``; None for an unknown GPU or a precision it lacks."""
    entry = next((p for p in peaks if p.matches(gpu)), None)
    if entry is None or precision not in entry.tflops:
        return None
    return entry, entry.tflops[precision]
