"""The rank's measured matrix-multiply peak: what a CPU device can compute at best, for MFU.

A CPU has no datasheet figure that holds inside a container limited to a cpuset, under another
rank's load, at the clock it really runs; so the payload measures it once per run, before training,
on the threads the rank trains with: a square ``torch.matmul`` in the run's math precision (float32,
or bfloat16 under ``--precision bf16``) repeated for about ``SECONDS``, each multiply ``2 n^3``
floating-point operations. Every rank prints one machine-readable line:

    clusterctl-peak {"rank": 0, "tflops": 0.051, "dtype": "float32", "n": 512, "threads": 2, ...}

Imports only torch and the standard library (it runs inside the benchmark image).
"""

from __future__ import annotations

import json
import time

import torch

PEAK_PREFIX = "clusterctl-peak "
SECONDS = 0.4
SIZE = 512
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def gemm_tflops(
    dtype: torch.dtype, *, size: int = SIZE, seconds: float = SECONDS
) -> tuple[float, int, float]:
    """TFLOP/s of ``size`` x ``size`` matrix multiplies in ``dtype`` on this process's torch threads.

    One untimed multiply first (page faults, the kernel's choice), then multiplies until ``seconds``
    have passed. Returns (TFLOP/s, multiplies timed, seconds they took).
    """
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    torch.matmul(a, b, out=out)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        torch.matmul(a, b, out=out)
        count += 1
    return 2 * size**3 * count / elapsed / 1e12, count, elapsed


def peak_line(rank: int, precision: str) -> str:
    """The rank's ``clusterctl-peak {json}`` line, measured now in ``precision``'s dtype (fp16: float32,
    which the payload refuses on CPUs anyway)."""
    dtype = DTYPES.get(precision, torch.float32)
    tflops, count, elapsed = gemm_tflops(dtype)
    figure = {
        "rank": rank,
        "tflops": round(tflops, 6),
        "dtype": str(dtype).removeprefix("torch."),
        "n": SIZE,
        "multiplies": count,
        "seconds": round(elapsed, 4),
        "threads": torch.get_num_threads(),
    }
    return PEAK_PREFIX + json.dumps(figure, sort_keys=True)
