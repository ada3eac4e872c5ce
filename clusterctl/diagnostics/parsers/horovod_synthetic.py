"""Horovod's synthetic benchmarks (tensorflow2_/pytorch_synthetic_benchmark.py and our payload).

Only rank 0 prints the summary in Horovod's scripts; with rank tags present, rank 0's lines win.
"""

from __future__ import annotations

import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, split_tag, to_float, to_int

_MODEL = re.compile(r"^\s*Model:\s*(\S+)")
_BATCH = re.compile(r"^\s*Batch size:\s*(\d+)")
_GPUS = re.compile(r"^\s*Number of GPUs:\s*(\d+)")
_ITER = re.compile(r"^\s*Iter #(\d+):\s*([\d.]+)\s*img/sec per (?:GPU|device)")
_PER_DEVICE = re.compile(r"^\s*Img/sec per (?:GPU|device):\s*([\d.]+)\s*(?:\+-\s*([\d.]+))?")
_TOTAL = re.compile(r"^\s*Total img/sec on (\d+) (?:GPU|device|CPU)\(s\):\s*([\d.]+)\s*(?:\+-\s*([\d.]+))?")
_NOISE = re.compile(r"^\s*(?:\.\.\.|Running warmup|Running benchmark)")


class HorovodSynthetic(Parsed):
    """What a Horovod synthetic benchmark printed."""

    model: str | None = Field(None, description="`Model:` echoed back, e.g. resnet50.")
    batch_size: int | None = Field(None, description="Per-device batch size (`Batch size:`).")
    num_gpus: int | None = Field(None, description="`Number of GPUs:`, else the N of the total line.")
    iterations: list[float] = Field(
        default_factory=list, description="img/sec per GPU of each timed iteration."
    )
    images_per_sec_per_device: float | None = Field(None, description="Mean img/sec per GPU.")
    images_per_sec_per_device_ci: float | None = Field(None, description="The +- interval of that mean.")
    total_images_per_sec: float | None = Field(None, description="`Total img/sec on N GPU(s)`.")
    total_images_per_sec_ci: float | None = Field(None, description="The +- interval of the total.")


def parse_horovod_synthetic(text: str) -> HorovodSynthetic:
    """Parse a Horovod synthetic benchmark log (optionally rank-tagged).

    Args:
        text: The log, as printed.

    Returns:
        Model, batch, GPU count, per-iteration and total throughput; unrecognised lines listed.
    """
    result = HorovodSynthetic()
    tagged = [(*split_tag(raw), raw) for raw in text.splitlines()]
    ranks = {rank for rank, _, _ in tagged if rank is not None}
    keep = 0 if 0 in ranks else None  # rank 0's lines when tags exist, else everything
    for rank, line, raw in tagged:
        if not line.strip() or (keep is not None and rank not in (keep, None)):
            continue
        if m := _MODEL.match(line):
            result.model = m.group(1)
        elif m := _BATCH.match(line):
            result.batch_size = to_int(m.group(1))
        elif m := _GPUS.match(line):
            result.num_gpus = to_int(m.group(1))
        elif m := _ITER.match(line):
            if (value := to_float(m.group(2))) is not None:
                result.iterations.append(value)
        elif m := _PER_DEVICE.match(line):
            result.images_per_sec_per_device = to_float(m.group(1))
            result.images_per_sec_per_device_ci = _opt(m.group(2))
        elif m := _TOTAL.match(line):
            result.total_images_per_sec = to_float(m.group(2))
            result.total_images_per_sec_ci = _opt(m.group(3))
            result.num_gpus = result.num_gpus or to_int(m.group(1))
        elif not _NOISE.match(line):
            result.unparsed_lines.append(raw)
    return result


def _opt(value: str | None) -> float | None:
    return to_float(value) if value else None
