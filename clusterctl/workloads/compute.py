"""What a training workload states about its arithmetic, for model FLOPs utilisation (MFU).

``ComputeFacts``: the FLOPs of one trained sample (how they were counted), the precision the
multiplies ran in, the device's name as the payload saw it, and the peak the payload measured on
a CPU. ``parse_peak_lines`` reads that peak from the payload's ``clusterctl-peak {json}`` lines
(``clusterctl/payload/peak.py``). Pure.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.diagnostics.model import marker_values

PEAK_PREFIX = "clusterctl-peak "

MathPrecision = Literal["fp32", "tf32", "fp16", "bf16"]


class MeasuredPeak(BaseModel):
    """The matrix-multiply rate the payload measured on each rank (CPUs), per device."""

    model_config = ConfigDict(frozen=True)

    tflops_per_device: float = Field(gt=0, description="Median over the ranks that printed one.")
    ranks: int = Field(ge=1, description="Ranks that printed a figure.")
    dtype: str = Field(description="The multiplies' dtype, e.g. float32.")
    threads: int | None = Field(None, description="Torch threads of the first rank's measurement.")


class ComputeFacts(BaseModel):
    """A workload's arithmetic: FLOPs per trained sample and the precision they ran in."""

    model_config = ConfigDict(frozen=True)

    flops_per_sample: float = Field(gt=0, description="Training FLOPs of one sample (forward + backward).")
    derivation: str = Field(description="How they were counted, in words.")
    precision: MathPrecision = Field(
        description="What the multiplies ran in: fp32, tf32 (fp32 on tensor cores), fp16 or bf16."
    )
    device_name: str | None = Field(None, description="The device as the payload named it, if it did.")
    measured_peak: MeasuredPeak | None = Field(None, description="The payload's CPU GEMM peak, if measured.")


def parse_peak_lines(log: str) -> MeasuredPeak | None:
    """The payload's measured peak from ``log``'s ``clusterctl-peak {json}`` lines (tagged or not).

    One line per rank; a rank that printed twice counts once (its last line). Lines whose figure is not a
    positive finite number are ignored; None when no rank printed a usable one.
    """
    by_rank: dict[int, tuple[float, dict[str, object]]] = {}
    for tag_rank, value in marker_values(log, PEAK_PREFIX):
        tflops = value.get("tflops") if isinstance(value, dict) else None
        if isinstance(tflops, bool) or not isinstance(tflops, int | float) or not 0 < tflops < math.inf:
            continue
        rank = value.get("rank")
        key = rank if isinstance(rank, int) else tag_rank if tag_rank is not None else -1 - len(by_rank)
        by_rank[key] = (float(tflops), value)
    if not by_rank:
        return None
    first = by_rank[min(by_rank, key=abs)][1]
    threads = first.get("threads")
    return MeasuredPeak(
        tflops_per_device=statistics.median(tflops for tflops, _ in by_rank.values()),
        ranks=len(by_rank),
        dtype=str(first.get("dtype", "float32")),
        threads=threads if isinstance(threads, int) and not isinstance(threads, bool) else None,
    )
