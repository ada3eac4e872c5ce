"""The number a run should have reached: multi-node throughput predicted from two measurements. Pure.

Inputs, all measured by clusterctl on the same cluster:

- the compute per step ``t_compute``: the configuration's own, measured (the useful compute of the run
  its report row is about, ``clusterctl.results.step``) when that run recorded a breakdown; otherwise
  from the single-device throughput ``T1`` (img/s: the median of the configuration's 1-device runs),
  ``t_compute = b / T1`` for a step of batch ``b``. The 1-device figure misses what sharing a node
  with communication costs the compute (2.7x on the quickstart's 2 nodes): a band made from it can
  contain the measurement by coincidence;
- the collective bus bandwidth ``B`` of the same fabric at the same world size (nccl-tests on GPUs,
  the ``allreduce`` workload on CPUs, run as `run --preflight`) **at the message size the framework
  all-reduces**: DDP's bucket (``bucket_cap_mb``, 25 MB by default) or Horovod's fusion buffer
  (``HOROVOD_FUSION_THRESHOLD``, 64 MiB by default), read off the collective's per-size curve
  (interpolated on log2 of the size). Bus bandwidth at 25-64 MB is well below the 1 GiB figure; the
  largest message's busbw is used only for runs recorded before the curve was. All-reducing ``G``
  gradient bytes over ``n`` ranks then takes ``t_allreduce = G x 2(n-1)/n / B`` (nccl-tests'
  ``busbw = algbw x 2(n-1)/n`` read backwards);
- ``G``, the workload's gradient bytes per step (parameters x 4, or x 2 with Horovod's fp16 compression).

Under FSDP a step all-gathers ``X_ag`` bytes (parameters) and reduce-scatters ``X_rs`` (gradients), each
moving ``(n-1)/n`` of its array at its own bus bandwidth (nccl-tests' allgather/reducescatter factor),
so ``t = (n-1)/n x (X_ag / B_ag + X_rs / B_rs)``: the formula above with ``G = (X_ag + X_rs) / 2`` and
``B`` the bytes-weighted harmonic mean of ``B_ag`` and ``B_rs`` (``effective_bus_bandwidth``), each
read at one block's message (``run --preflight`` measures both collectives under FSDP).

Two predictions of the total throughput ``n x b / t_step``: without overlap ``t_step = t_compute +
t_allreduce`` (communication after the backward pass), with full overlap ``t_step = max(...)``
(Horovod and DDP all-reduce during the backward pass, so a run should land between the two). When
``t_allreduce <= t_compute`` the whole exchange fits inside the compute (``compute_bound``): overlapped,
it need cost nothing. Which part did limit a run is `explain`'s verdict, on the same step
(``clusterctl.results.step``), not this flag.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

# Horovod's default HOROVOD_FUSION_THRESHOLD (64 MiB): the size its fused allreduces reach.
HOROVOD_FUSION_BYTES = 64 * 1024 * 1024
# torch DDP's bucket_cap_mb counts MiB (bucket_cap_mb * 1024 * 1024 bytes).
MIB = 1024 * 1024


class Prediction(BaseModel):
    """The predicted throughput of one configuration at one device count, and what it came from."""

    single_device: float = Field(description="Measured 1-device throughput (img/s).")
    bus_bandwidth_gb_s: float = Field(description="Measured collective bus bandwidth (GB/s).")
    gradient_bytes: int = Field(description="Bytes all-reduced per step.")
    compute_s: float = Field(
        description="Seconds of compute per step: the measured useful compute (compute_source breakdown), "
        "else batch / single_device."
    )
    compute_source: Literal["breakdown", "single-device"] = Field(
        "single-device",
        description="breakdown: the configuration's measured compute per step; single-device: batch / the "
        "1-device throughput.",
    )
    allreduce_s: float = Field(description="Seconds of allreduce per step: G x 2(n-1)/n / busbw.")
    no_overlap: float = Field(description="Predicted total throughput, allreduce after compute (img/s).")
    full_overlap: float = Field(
        description="Predicted total throughput, allreduce hidden in compute (img/s)."
    )
    fused_bytes: int | None = Field(
        None,
        description="The message size the bus bandwidth was read at (bucket/fusion size); None: largest.",
    )
    compute_bound: bool = Field(
        False, description="t_allreduce <= t_compute: overlapped, the exchange fits inside the compute."
    )
    by_collective: dict[str, float] = Field(
        default_factory=dict,
        description="FSDP: each collective's bus bandwidth (GB/s: allgather, reducescatter) that "
        "bus_bandwidth_gb_s was made from; empty: one allreduce.",
    )

    def verdict(self, measured: float) -> Literal["below", "within", "above"]:
        """Where a measured throughput lands against the range [no_overlap, full_overlap]."""
        if measured < self.no_overlap:
            return "below"
        return "above" if measured > self.full_overlap else "within"


def fused_bytes(framework: str, bucket_cap_mb: float, gradient_bytes: int) -> int:
    """The size of the messages the framework all-reduces: a DDP bucket or Horovod's fusion buffer,
    never more than the gradients themselves."""
    size = int(bucket_cap_mb * MIB) if framework == "ddp" else HOROVOD_FUSION_BYTES
    return min(size, gradient_bytes)


def bus_bandwidth_at(curve: Mapping[int, float], size: int) -> float | None:
    """The bus bandwidth of ``curve`` (GB/s by message bytes) at ``size``: linear in log2(size) between
    the two measured sizes around it, the nearest end's value outside them; None for an empty curve."""
    points = sorted((s, b) for s, b in curve.items() if s > 0)
    if not points:
        return None
    if size <= points[0][0]:
        return points[0][1]
    for (low, low_bw), (high, high_bw) in itertools.pairwise(points):
        if low <= size <= high:
            t = (math.log2(size) - math.log2(low)) / (math.log2(high) - math.log2(low))
            return low_bw + t * (high_bw - low_bw)
    return points[-1][1]


def effective_bus_bandwidth(parts: Sequence[tuple[int, float]]) -> float:
    """The one bus bandwidth (GB/s) at which all of ``parts`` ((bytes, that part's bus bandwidth), each
    moved with the same bus factor) move in the time they take each at its own: the bytes-weighted
    harmonic mean.

    Raises:
        ValueError: no parts, or a bandwidth that is not positive.
    """
    if not parts or min(busbw for _, busbw in parts) <= 0:
        raise ValueError(f"bus bandwidths must be positive: {list(parts)}")
    return sum(size for size, _ in parts) / sum(size / busbw for size, busbw in parts)


def predict_throughput(
    *,
    single_device: float,
    batch_size: int,
    devices: int,
    gradient_bytes: int,
    bus_bandwidth_gb_s: float,
    fused: int | None = None,
    by_collective: Mapping[str, float] | None = None,
    compute_s: float | None = None,
) -> Prediction:
    """Predict the total throughput of ``devices`` ranks from the single-device one and the bus bandwidth.

    Args:
        single_device: measured throughput of one device (samples/s).
        batch_size: samples per device and step.
        devices: ranks of the run (n).
        gradient_bytes: bytes each rank all-reduces per step (G).
        bus_bandwidth_gb_s: the collective's bus bandwidth at n ranks (GB/s, 1e9 bytes), at ``fused``.
        fused: the message size that bandwidth was read at (None: the collective's largest).
        by_collective: FSDP: each collective's bus bandwidth that ``bus_bandwidth_gb_s`` was made from.
        compute_s: the measured compute per step at ``devices`` (a breakdown's useful compute, s); None:
            ``batch_size / single_device``.
    """
    compute = batch_size / single_device if compute_s is None else compute_s
    allreduce = gradient_bytes * 2 * (devices - 1) / devices / (bus_bandwidth_gb_s * 1e9)
    samples = devices * batch_size
    return Prediction(
        single_device=single_device,
        bus_bandwidth_gb_s=bus_bandwidth_gb_s,
        gradient_bytes=gradient_bytes,
        compute_s=compute,
        allreduce_s=allreduce,
        no_overlap=samples / (compute + allreduce),
        full_overlap=samples / max(compute, allreduce),
        fused_bytes=fused,
        compute_bound=allreduce <= compute,
        compute_source="single-device" if compute_s is None else "breakdown",
        by_collective=dict(by_collective or {}),
    )
