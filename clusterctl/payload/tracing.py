"""Traces on request (``run --trace``): a few training steps per rank under ``torch.profiler``, and under
Horovod its timeline of the same steps, printed into the run's output for clusterctl to keep.

Shipped beside ``resnet50_bench.py`` and imported by it as a sibling; torch and the standard library
only. The traced steps run after the warm-up and before the measured steps, so the profiler's own cost
never reaches the throughput. Each file is printed as one line,

    CLUSTERCTL_TRACE {"name": "rank0.json", "gzip_base64": "..."}

(``clusterctl.results.traces`` takes these lines out of ``output.log`` into ``trace/<name>``); a file
over ``MAX_TRACE_BYTES`` is not printed, a line with ``dropped`` says so. Chrome trace event JSON, as
Perfetto (ui.perfetto.dev) and chrome://tracing open. A file goes in parts of ``PART_CHARS``
(``"part": i, "parts": n``), since mpirun cuts long lines.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch

TRACE_PREFIX = "CLUSTERCTL_TRACE "
# One rank's trace of a few ResNet-50 steps is a few MB; the bound keeps output.log and the run
# directory small whatever the model or step count.
MAX_TRACE_BYTES = 32 * 1024 * 1024
# mpirun's output forwarding cuts longer lines into pieces, each tagged: a file goes in short parts.
PART_CHARS = 3000


def trace_lines(name: str, data: bytes) -> list[str]:
    """The output lines carrying one trace file, in parts of ``PART_CHARS`` (or one saying it was over
    the bound)."""
    if len(data) > MAX_TRACE_BYTES:
        note = f"{len(data)} bytes, over the bound of {MAX_TRACE_BYTES}: not kept"
        return [TRACE_PREFIX + json.dumps({"name": name, "dropped": note})]
    packed = base64.b64encode(gzip.compress(data, compresslevel=6)).decode("ascii")
    chunks = [packed[i : i + PART_CHARS] for i in range(0, len(packed), PART_CHARS)] or [""]
    return [
        TRACE_PREFIX + json.dumps({"name": name, "part": i, "parts": len(chunks), "gzip_base64": chunk})
        for i, chunk in enumerate(chunks)
    ]


def run_traced(
    step: Callable[[], object], steps: int, sync: Callable[[], None], rank: int, hvd: Any | None
) -> list[str]:
    """Run ``steps`` training steps under the profiler (and Horovod's timeline when ``hvd`` is given);
    the trace lines of this rank: ``rank<N>.json``, and on Horovod's rank 0 ``horovod-timeline.json``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with tempfile.TemporaryDirectory(prefix="clusterctl-trace-") as folder:
        timeline = os.path.join(folder, "horovod-timeline.json")
        if hvd is not None:  # HOROVOD_TIMELINE=DYNAMIC at init (resnet50_bench.py) allows it
            hvd.start_timeline(timeline)  # every rank calls it; the coordinator (rank 0) writes
        sync()
        with torch.profiler.profile(activities=activities) as profiler:
            for _ in range(steps):
                step()
            sync()
        if hvd is not None:
            hvd.stop_timeline()
        path = os.path.join(folder, f"rank{rank}.json")
        profiler.export_chrome_trace(path)
        lines = trace_lines(f"rank{rank}.json", _read(path))
        if hvd is not None and rank == 0 and os.path.exists(timeline):
            lines += trace_lines("horovod-timeline.json", _read(timeline))
    return lines


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
