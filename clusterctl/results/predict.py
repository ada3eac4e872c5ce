"""The number a run should have reached: multi-node throughput predicted from two measurements. Pure.

Inputs, all measured by clusterctl on the same cluster:

- the single-device throughput ``T1`` (img/s: the median of the configuration's 1-device runs), so
  one step of batch ``b`` computes in ``t_compute = b / T1``;
- the collective bus bandwidth ``B`` of the same fabric at the same world size (nccl-tests on GPUs,
  the ``allreduce`` workload on CPUs; its largest message's busbw, as fused gradient buffers are
  large), so all-reducing ``G`` gradient bytes over ``n`` ranks takes
  ``t_allreduce = G x 2(n-1)/n / B`` (nccl-tests' ``busbw = algbw x 2(n-1)/n`` read backwards);
- ``G``, the workload's gradient bytes per step (parameters x 4, or x 2 with Horovod's fp16 compression).

Two predictions of the total throughput ``n x b / t_step``: without overlap ``t_step = t_compute +
t_allreduce`` (communication after the backward pass), with full overlap ``t_step = max(...)``
(Horovod and DDP all-reduce during the backward pass, so a run should land between the two).
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Prediction(BaseModel):
    """The predicted throughput of one configuration at one device count, and what it came from."""

    single_device: float = Field(description="Measured 1-device throughput (img/s).")
    bus_bandwidth_gb_s: float = Field(description="Measured collective bus bandwidth (GB/s).")
    gradient_bytes: int = Field(description="Bytes all-reduced per step.")
    compute_s: float = Field(description="Seconds of compute per step: batch / single_device.")
    allreduce_s: float = Field(description="Seconds of allreduce per step: G x 2(n-1)/n / busbw.")
    no_overlap: float = Field(description="Predicted total throughput, allreduce after compute (img/s).")
    full_overlap: float = Field(
        description="Predicted total throughput, allreduce hidden in compute (img/s)."
    )


def predict_throughput(
    *, single_device: float, batch_size: int, devices: int, gradient_bytes: int, bus_bandwidth_gb_s: float
) -> Prediction:
    """Predict the total throughput of ``devices`` ranks from the single-device one and the bus bandwidth.

    Args:
        single_device: measured throughput of one device (samples/s).
        batch_size: samples per device and step.
        devices: ranks of the run (n).
        gradient_bytes: bytes each rank all-reduces per step (G).
        bus_bandwidth_gb_s: the collective's bus bandwidth at n ranks (GB/s, 1e9 bytes).
    """
    compute = batch_size / single_device
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
    )
