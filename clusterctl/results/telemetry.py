"""Node telemetry of a run: the record format shared by the sampler (which writes it) and the diagnosis
(which reads it). Pure.

A run directory keeps one file per node, ``telemetry/<node>.jsonl``: JSON Lines, one object per sample
(about once a second), in time order. Every field but ``t`` may be null: the sampler could not read that
source on that node (no GPU, no ``nvidia-smi``, no NFS mount, no permission), which the diagnosis treats
as *unknown*, never as zero. The first sample of a file has no rates (a rate needs two reads), so its
rate fields are null.

Each sample:

- ``t``: seconds since the epoch (the node's clock, float);
- ``cpu``: ``{util, steal, iowait}`` as fractions of all the node's CPUs over the last interval;
- ``mem_used_bytes``, ``mem_total_bytes``; ``load1`` (the 1-minute load average);
- ``net``: per interface or rail name (``mlx5_0:1`` for an HCA port, ``eth0`` for an interface) its
  ``{tx_Bps, rx_Bps}`` (bytes per second over the last interval);
- ``storage``: ``{read_Bps, nfs_read_Bps}``: bytes per second read from block devices (whole disks, not
  partitions) and by the NFS client;
- ``gpus``: per GPU ``{index, util, mem_used_bytes, power_w, sm_clock_mhz, throttle, pcie_tx_Bps,
  pcie_rx_Bps}`` (``util`` a fraction; ``throttle`` the active clock-event reasons, empty when none).

A sampler that could not start at all on a node writes no file; ``unknown`` in the run record names it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterctl.readfile import read_bounded

TELEMETRY_DIR = "telemetry"
# A sample a second of a node with 8 GPUs is under 2 KB: 128 MiB is over 18 hours of it. A larger file
# is not read whole (it would be held in memory twice over while parsed).
MAX_TELEMETRY_BYTES = 128 << 20


class CpuSample(BaseModel):
    """The node's CPUs over the last interval, as fractions of all of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    util: float | None = Field(None, ge=0, le=1, description="Busy share (user, system, irq, steal...).")
    steal: float | None = Field(None, ge=0, le=1, description="Share stolen by the hypervisor.")
    iowait: float | None = Field(None, ge=0, le=1, description="Share idle waiting on I/O.")


class LinkRate(BaseModel):
    """One interface or HCA port's throughput over the last interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tx_Bps: float | None = Field(None, ge=0)
    rx_Bps: float | None = Field(None, ge=0)


class StorageRate(BaseModel):
    """Bytes read per second over the last interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_Bps: float | None = Field(None, ge=0, description="From block devices (whole disks).")
    nfs_read_Bps: float | None = Field(None, ge=0, description="By the NFS client.")


class GpuSample(BaseModel):
    """One GPU at the sample's time (``nvidia-smi`` or DCGM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0)
    util: float | None = Field(None, ge=0, le=1)
    mem_used_bytes: int | None = Field(None, ge=0)
    power_w: float | None = Field(None, ge=0)
    sm_clock_mhz: float | None = Field(None, ge=0)
    throttle: list[str] | None = Field(None, description="Active clock-event reasons; [] when none.")
    pcie_tx_Bps: float | None = Field(None, ge=0)
    pcie_rx_Bps: float | None = Field(None, ge=0)


class Sample(BaseModel):
    """One telemetry sample of one node."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    t: float = Field(description="Seconds since the epoch, the node's clock.")
    cpu: CpuSample | None = None
    mem_used_bytes: int | None = Field(None, ge=0)
    mem_total_bytes: int | None = Field(None, ge=0)
    load1: float | None = Field(None, ge=0)
    net: dict[str, LinkRate] | None = None
    storage: StorageRate | None = None
    gpus: list[GpuSample] | None = None


def telemetry_path(run_dir: Path, node: str) -> Path:
    """Where a node's samples are kept in a run directory."""
    return run_dir / TELEMETRY_DIR / f"{node}.jsonl"


def parse_samples(text: str) -> list[Sample]:
    """The samples of one node's file; a line that is not one (cut off when the sampler was stopped,
    garbled) is skipped, so a partial file still gives what it holds."""
    samples = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            samples.append(Sample.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError):
            continue
    return samples


def load_telemetry(run_dir: Path) -> dict[str, list[Sample]]:
    """Every node's samples kept in ``run_dir``, by node name (empty: the run has no telemetry).

    Each file is read through ``readfile.read_bounded``: a FIFO, a device or a file over
    ``MAX_TELEMETRY_BYTES`` there is never read (nor waited on), and gives that node no samples, as an
    unreadable file does: its telemetry is unknown.
    """
    folder = run_dir / TELEMETRY_DIR
    if not folder.is_dir():
        return {}
    samples = {}
    for path in sorted(folder.glob("*.jsonl")):
        try:
            text = read_bounded(path, MAX_TELEMETRY_BYTES).decode(errors="replace")
        except (OSError, ValueError):
            text = ""
        samples[path.stem] = parse_samples(text)
    return samples
