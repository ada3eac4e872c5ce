# clusterctl-nodesampler (a marker: how `ps` on a node finds it, as python3 -c shows its source)
"""Node telemetry during a run: one sample a second of the node's CPUs, memory, load, fabric, storage
and GPUs, printed as JSON Lines (``clusterctl.results.telemetry`` is the record format).

Runs on the node **host**, not in the benchmark container (the host sees every rank's load, the HCAs
and ``nvidia-smi``): a stdlib-only script for any ``python3`` >= 3.7, shipped with the payload. The
ssh launcher runs it as ``python3 -c <this file> ...`` over SSH and reads its stdout; a Slurm batch
script runs the job's copy with ``srun`` on every node of the allocation, stdout in a file per node.
Its own cost is measured by ``bench/telemetry_cost.py``.

Sources (each one that cannot be read is null in every sample, never zero):

- ``/proc/stat`` (CPU busy, steal, iowait shares), ``/proc/meminfo``, ``/proc/loadavg``;
- ``/sys/class/net/<if>/statistics/{tx,rx}_bytes`` of each ``--net`` interface, and every HCA port's
  ``/sys/class/infiniband/*/ports/*/counters/port_{xmit,rcv}_data`` (4-byte words): the counters the
  proof by counters reads;
- ``/proc/diskstats`` of whole disks (``/sys/block/<disk>/device`` exists: no partition, loop, dm or
  md, which would count the same bytes twice), and the NFS client's bytes read from its servers
  (``/proc/self/mountstats``);
- ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``, one query per sample.

Bounded: it exits after ``--max-seconds``, when ``--stop-file`` appears, when its stdin ends
(``--watch-stdin``: the SSH session that started it closed, its controller gone) and when its stdout
is closed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import select
import subprocess
import sys
import time
from typing import Any

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the disk's own sector size
WORD_BYTES = 4  # an HCA port's data counters count 4-byte words
IB_PORTS = "/sys/class/infiniband/*/ports/*/counters"
NVIDIA_SMI_TIMEOUT_S = 5.0
# What is asked of nvidia-smi, in its order; the clock-event field was renamed in driver 535, and
# an unknown field fails the whole query, so the names are tried in turn and the first that works kept.
GPU_FIELDS = ("index", "utilization.gpu", "memory.used", "power.draw", "clocks.sm")
THROTTLE_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# NVML's clocks event reason bits (nvml.h, nvmlClocksEventReason*), by name.
THROTTLE_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
MIB = 1024 * 1024


def read_text(path: str) -> str | None:
    """A file's text, None when it cannot be read."""
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def parse_proc_stat(text: str) -> list[int] | None:
    """The aggregate ``cpu`` line's jiffies (user nice system idle iowait irq softirq steal ...)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu" and len(parts) >= 5:
            try:
                return [int(v) for v in parts[1:]]
            except ValueError:
                return None
    return None


def cpu_shares(before: list[int], after: list[int]) -> dict[str, float] | None:
    """Busy, steal and iowait shares of all CPUs between two ``cpu`` lines (guest time is in user)."""
    delta = [after[i] - before[i] for i in range(min(8, len(before), len(after)))]  # no zip strict: 3.7
    total = sum(delta)
    if total <= 0 or any(d < 0 for d in delta):
        return None
    delta += [0] * (8 - len(delta))
    idle, iowait, steal = delta[3], delta[4], delta[7]
    return {
        "util": round(min(1.0, (total - idle - iowait) / total), 4),
        "steal": round(steal / total, 4),
        "iowait": round(iowait / total, 4),
    }


def parse_meminfo(text: str) -> tuple[int, int] | None:
    """(used, total) bytes: MemTotal less MemAvailable."""
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024
    if "MemTotal" not in values or "MemAvailable" not in values:
        return None
    return max(values["MemTotal"] - values["MemAvailable"], 0), values["MemTotal"]


def parse_loadavg(text: str) -> float | None:
    """The 1-minute load average."""
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


def parse_diskstats(text: str, disks: set[str]) -> int | None:
    """Bytes read so far from the named whole disks; None when none of them is listed."""
    total, found = 0, False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[2] in disks and parts[5].isdigit():
            total += int(parts[5]) * SECTOR_BYTES
            found = True
    return total if found else None


def parse_mountstats(text: str) -> int | None:
    """Bytes the NFS client read from its servers so far (``bytes:`` field 5 of every nfs mount);
    None when there is no NFS mount."""
    total, found, nfs = 0, False, False
    for line in text.splitlines():
        if line.startswith("device "):
            nfs = " with fstype nfs" in line
        elif nfs and line.strip().startswith("bytes:"):
            parts = line.split()
            if len(parts) >= 6 and parts[5].isdigit():
                total += int(parts[5])
                found = True
    return total if found else None


def whole_disks() -> set[str]:
    """Block devices backed by a device: whole disks, not partitions, loop, dm or md devices."""
    return {os.path.basename(path) for path in glob.glob("/sys/block/*") if os.path.exists(path + "/device")}


def link_bytes(interfaces: list[str]) -> dict[str, tuple[int, int]]:
    """(tx, rx) bytes so far per interface named and per HCA port (``mlx5_0:1``)."""
    found = {}
    for name in interfaces:
        pair = _pair(
            f"/sys/class/net/{name}/statistics/tx_bytes", f"/sys/class/net/{name}/statistics/rx_bytes", 1
        )
        if pair is not None:
            found[name] = pair
    for counters in sorted(glob.glob(IB_PORTS)):
        port_dir = os.path.dirname(counters)
        name = f"{os.path.basename(os.path.dirname(os.path.dirname(port_dir)))}:{os.path.basename(port_dir)}"
        pair = _pair(f"{counters}/port_xmit_data", f"{counters}/port_rcv_data", WORD_BYTES)
        if pair is not None:
            found[name] = pair
    return found


def _pair(tx_path: str, rx_path: str, scale: int) -> tuple[int, int] | None:
    tx, rx = read_text(tx_path), read_text(rx_path)
    try:
        return (int(tx) * scale, int(rx) * scale) if tx is not None and rx is not None else None
    except ValueError:
        return None


def _number(value: str) -> float | None:
    value = value.strip()
    try:
        return float(value)
    except ValueError:  # "N/A", "[Not Supported]", "[Unknown Error]"
        return None


def throttle_reasons(value: str) -> list[str] | None:
    """The active clock-event reasons of a ``0x...`` bit mask (unknown bits as ``0x...``)."""
    try:
        mask = int(value.strip(), 16)
    except ValueError:
        return None
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    rest = mask & ~sum(bit for bit, _ in THROTTLE_BITS)
    return names + ([hex(rest)] if rest else [])


def parse_gpu_csv(text: str, fields: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """GPUs from ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` output.

    A line with another number of values is skipped; a value that is no number (``N/A``,
    ``[Not Supported]``) is null; a GPU without an ``index`` field gets its line's position. None when
    no line is a GPU (an error message, as for a field this nvidia-smi does not know).
    """
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        row = {name: values[i] for i, name in enumerate(fields)}
        index = _number(row.get("index", str(len(gpus))))
        util = _number(row.get("utilization.gpu", ""))
        mem = _number(row.get("memory.used", ""))
        throttle = next((row[f] for f in THROTTLE_FIELDS if f in row), None)
        gpus.append(
            {
                "index": int(index) if index is not None and index >= 0 else len(gpus),
                "util": min(util / 100.0, 1.0) if util is not None and util >= 0 else None,
                "mem_used_bytes": int(mem * MIB) if mem is not None and mem >= 0 else None,
                "power_w": _non_negative(_number(row.get("power.draw", ""))),
                "sm_clock_mhz": _non_negative(_number(row.get("clocks.sm", ""))),
                "throttle": throttle_reasons(throttle) if throttle is not None else None,
                "pcie_tx_Bps": None,
                "pcie_rx_Bps": None,
            }
        )
    return gpus or None


def _non_negative(value: float | None) -> float | None:
    return value if value is not None and value >= 0 else None


class GpuReader:
    """One ``nvidia-smi`` query per sample; the first field list this nvidia-smi accepts is kept.

    ``fields`` is None once no list worked or there is no nvidia-smi: GPUs are then unknown.
    """

    def __init__(self, command: str = "nvidia-smi") -> None:
        self.command = command
        self.candidates = [(*GPU_FIELDS, name) for name in THROTTLE_FIELDS] + [GPU_FIELDS]
        self.fields: tuple[str, ...] | None = None

    def read(self) -> list[dict[str, Any]] | None:
        """Every GPU now, or None (no nvidia-smi, no GPU, or it failed)."""
        while self.candidates:
            fields = self.fields or self.candidates[0]
            text = self._query(fields)
            if text is None:
                self.candidates = []
                return None
            gpus = parse_gpu_csv(text, fields)
            if gpus is not None or self.fields is not None:
                self.fields = fields
                return gpus
            self.candidates.pop(0)  # "Field ... is not a valid field to query.": try the next list
        return None

    def _query(self, fields: tuple[str, ...]) -> str | None:
        argv = [self.command, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
        try:
            done = subprocess.run(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=NVIDIA_SMI_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.decode(errors="replace")


def _rate(now: int | None, before: int | None, seconds: float) -> float | None:
    if now is None or before is None or seconds <= 0 or now < before:  # a counter reset is unknown
        return None
    return round((now - before) / seconds, 1)


class Sampler:
    """Reads every source once per ``sample``; rates are over the time since the previous one."""

    def __init__(self, interfaces: list[str], gpus: GpuReader | None) -> None:
        self.interfaces = interfaces
        self.gpus = gpus
        self.disks = whole_disks()
        self.previous: dict[str, Any] | None = None

    def raw(self) -> dict[str, Any]:
        """Every counter now (cumulative values; None where unreadable)."""
        stat, mountstats = read_text("/proc/stat"), read_text("/proc/self/mountstats")
        diskstats = read_text("/proc/diskstats")
        return {
            "time": time.monotonic(),
            "cpu": parse_proc_stat(stat) if stat is not None else None,
            "links": link_bytes(self.interfaces),
            "disk": parse_diskstats(diskstats, self.disks) if diskstats is not None and self.disks else None,
            "nfs": parse_mountstats(mountstats) if mountstats is not None else None,
        }

    def sample(self) -> dict[str, Any]:
        """One sample in the record format (``clusterctl.results.telemetry.Sample``)."""
        t = time.time()
        now = self.raw()
        before = self.previous
        self.previous = now
        meminfo, loadavg = read_text("/proc/meminfo"), read_text("/proc/loadavg")
        memory = parse_meminfo(meminfo) if meminfo is not None else None
        seconds = now["time"] - before["time"] if before else 0.0
        cpu = None
        if before and before["cpu"] and now["cpu"]:
            cpu = cpu_shares(before["cpu"], now["cpu"])
        net = None
        if now["links"]:
            net = {}
            for name, (tx, rx) in sorted(now["links"].items()):
                old = before["links"].get(name) if before else None
                net[name] = {
                    "tx_Bps": _rate(tx, old[0], seconds) if old else None,
                    "rx_Bps": _rate(rx, old[1], seconds) if old else None,
                }
        storage = None
        if now["disk"] is not None or now["nfs"] is not None:
            storage = {
                "read_Bps": _rate(now["disk"], before["disk"], seconds) if before else None,
                "nfs_read_Bps": _rate(now["nfs"], before["nfs"], seconds) if before else None,
            }
        return {
            "t": round(t, 3),
            "cpu": cpu,
            "mem_used_bytes": memory[0] if memory else None,
            "mem_total_bytes": memory[1] if memory else None,
            "load1": parse_loadavg(loadavg) if loadavg is not None else None,
            "net": net,
            "storage": storage,
            "gpus": self.gpus.read() if self.gpus else None,
        }


def _wait(seconds: float, watch_stdin: bool) -> bool:
    """Sleep ``seconds``; False when stdin ended meanwhile (watched: the controller is gone)."""
    if not watch_stdin:
        time.sleep(max(seconds, 0.0))
        return True
    ready, _, _ = select.select([sys.stdin], [], [], max(seconds, 0.0))
    return not ready or bool(os.read(sys.stdin.fileno(), 4096))


def main(argv: list[str] | None = None) -> int:
    """Sample until stopped (see the module's docstring); exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", action="append", default=[], help="an interface to sample (repeat)")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--max-seconds", type=float, required=True, help="the hard lifetime cap")
    parser.add_argument("--stop-file", help="exit once this file exists")
    parser.add_argument("--watch-stdin", action="store_true", help="exit when stdin ends")
    parser.add_argument("--no-gpu", action="store_true", help="do not run nvidia-smi")
    args = parser.parse_args(argv)
    sampler = Sampler(args.net, None if args.no_gpu else GpuReader())
    end = time.monotonic() + args.max_seconds
    next_at = time.monotonic()
    try:
        while time.monotonic() < end:
            if args.stop_file and os.path.exists(args.stop_file):
                break
            sys.stdout.write(json.dumps(sampler.sample(), separators=(",", ":")) + "\n")
            sys.stdout.flush()
            next_at = max(next_at + args.interval, time.monotonic())
            if not _wait(min(next_at, end) - time.monotonic(), args.watch_stdin):
                break
    except BrokenPipeError:  # the reader is gone: nothing more can be said (nor flushed at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
