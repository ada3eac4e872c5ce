"""Model FLOPs utilisation: the run's achieved FLOP/s against the devices' peak. Pure.

achieved FLOP/s = training FLOPs per sample (the workload's ``ComputeFacts``) x samples per second (the
run's total throughput); MFU = achieved / (peak per device x devices). The peak per device is the
datasheet's dense figure for the GPU at the run's math precision (``peaks.yml``), or on CPUs the matrix
multiply rate the payload measured on each rank before training (``payload/peak.py``). Without a
known peak, MFU is None and the achieved figure stands alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from clusterctl.results.peaks import DevicePeak, find_peak
from clusterctl.workloads.compute import ComputeFacts, MathPrecision

PeakSource = Literal["datasheet", "measured"]


class ModelFlops(BaseModel):
    """A run's arithmetic rate and, where the device's peak is known, its fraction of that peak."""

    flops_per_sample: float = Field(description="Training FLOPs of one sample (forward + backward).")
    derivation: str = Field(description="How the FLOPs per sample were counted.")
    precision: MathPrecision = Field(description="The math precision the peak is read at.")
    achieved_tflops: float = Field(
        description="FLOPs per sample x total samples/s, in TFLOP/s (all devices)."
    )
    peak_tflops: float | None = Field(None, description="Peak per device (TFLOP/s); None: unknown.")
    peak_source: PeakSource | None = Field(
        None, description="datasheet (a GPU's dense peak, peaks.yml) or measured (the payload's CPU GEMM)."
    )
    peak_reference: str | None = Field(
        None, description="Which peak: the peaks.yml entry, or the measurement (dtype, ranks, threads)."
    )
    mfu: float | None = Field(
        None, description="achieved / (peak per device x devices); None without a peak."
    )


def model_flops(
    facts: ComputeFacts,
    samples_per_sec: float,
    devices: int,
    *,
    gpu: str | None,
    peaks: list[DevicePeak],
) -> ModelFlops:
    """The run's ``ModelFlops``: ``samples_per_sec`` over all ``devices``; ``gpu``: the GPU's name (the
    inventory's gpus.model) on a GPU run, None on CPUs (where the payload's measured peak is used).

    On a GPU run the inventory's name is looked up first, then the name the payload printed.
    """
    achieved = facts.flops_per_sample * samples_per_sec / 1e12
    peak: float | None = None
    source: PeakSource | None = None
    reference: str | None = None
    if gpu is not None:
        names = [name for name in (gpu, facts.device_name) if name]
        found = next((hit for name in names if (hit := find_peak(name, facts.precision, peaks))), None)
        if found:
            entry, peak = found
            source, reference = "datasheet", f"{entry.name} {facts.precision} (peaks.yml)"
    elif facts.measured_peak is not None:
        measured = facts.measured_peak
        peak, source = measured.tflops_per_device, "measured"
        threads = f", {measured.threads} threads" if measured.threads else ""
        reference = f"{measured.dtype} GEMM, median of {measured.ranks} ranks{threads}"
    return ModelFlops(
        flops_per_sample=facts.flops_per_sample,
        derivation=facts.derivation,
        precision=facts.precision,
        achieved_tflops=achieved,
        peak_tflops=peak,
        peak_source=source,
        peak_reference=reference,
        mfu=achieved / (peak * devices) if peak else None,
    )
