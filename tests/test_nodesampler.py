"""The node telemetry sampler against real sources: this machine's own /proc and /sys, run as the ssh
launcher runs it (``python3 -c <script>``), and nvidia-smi's real captured output for the GPU parser."""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterctl.payload import nodesampler
from clusterctl.results.telemetry import parse_samples
from clusterctl.results.telemetry_status import split_output, telemetry_files, unknown_sources
from clusterctl.run.sampling import sampler_argv, sampler_script
from tests.helpers.traffic import send_over_loopback

FIXTURES = Path("/work/shared/fixtures/nvidia_smi_query_csv")
# utilization.gpu etc. of an RTX 2080, nvidia-smi 440.64 (the fixture's own source line names the query).
RTX2080_FIELDS = (
    "power.limit", "power.min_limit", "power.max_limit", "memory.total", "vbios_version", "driver_version",
    "name", "gpu_uuid", "power.draw", "temperature.gpu", "temperature.memory", "clocks.current.graphics",
    "clocks.sm", "clocks.mem", "utilization.gpu", "utilization.memory", "fan.speed",
    "pcie.link.width.current", "pstate",
)  # fmt: skip


def _fixture(name: str) -> str:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    return "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#"))


def _run_sampler(seconds: float, *extra: str) -> str:
    """The sampler as the ssh launcher starts it, for ``seconds`` at 0.5 s; its stdout."""
    argv = sampler_argv(sampler_script(), ["lo"], seconds, watch_stdin=False)
    argv[0] = sys.executable
    done = subprocess.run(
        [*argv, "--interval", "0.5", *extra],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_few_seconds_of_samples_are_the_record_format_with_real_rates() -> None:
    text = _run_sampler(3)
    samples = parse_samples(text)
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(samples) == len(lines) >= 4  # every line a valid Sample: rates >= 0, shares in [0, 1]
    assert [s.t for s in samples] == sorted(s.t for s in samples)
    first, *rest = samples
    assert first.cpu is None and first.net is not None and first.net["lo"].rx_Bps is None  # no rate yet
    assert all(s.cpu is not None and s.cpu.util is not None for s in rest)
    assert all(s.mem_total_bytes and s.mem_used_bytes and s.mem_used_bytes <= s.mem_total_bytes for s in rest)
    assert all(s.net and s.net["lo"].rx_Bps is not None for s in rest)
    assert first.gpus is None  # no nvidia-smi here: unknown, not zero
    unknown = unknown_sources(samples)
    assert "gpus" in unknown and not {"cpu", "memory", "load", "net"} & set(unknown)


def test_loopback_bytes_sent_during_sampling_show_in_its_rates() -> None:
    sent = 64 * 1024 * 1024
    sender = threading.Timer(1.5, send_over_loopback, [sent])  # after the first two samples
    sender.start()
    text = _run_sampler(5)
    sender.join(30)
    samples = parse_samples(text)
    seen = sum((s.net["lo"].rx_Bps or 0) * (s.t - prev.t) for prev, s in itertools.pairwise(samples) if s.net)
    assert seen >= sent * 0.9, seen  # the bytes counted once, at least (others may use lo too)


def test_a_busy_core_is_counted_in_the_cpu_share() -> None:
    """The busy share of all CPUs between two real reads covers at least the CPU time a child burned
    (whatever else the machine does: its load only adds to the share)."""
    stat = Path("/proc/stat")
    before_jiffies = nodesampler.parse_proc_stat(stat.read_text())
    before_child = resource.getrusage(resource.RUSAGE_CHILDREN)
    burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=120)
    after_child = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_jiffies = nodesampler.parse_proc_stat(stat.read_text())
    assert before_jiffies and after_jiffies
    shares = nodesampler.cpu_shares(before_jiffies, after_jiffies)
    assert shares is not None
    burned_s = (after_child.ru_utime + after_child.ru_stime) - (before_child.ru_utime + before_child.ru_stime)
    total_s = sum((after_jiffies[i] - before_jiffies[i]) for i in range(8)) / os.sysconf("SC_CLK_TCK")
    assert burned_s >= 0.9
    assert shares["util"] * total_s >= burned_s * 0.8, (shares, total_s, burned_s)


def test_the_stop_file_and_the_end_of_stdin_each_end_the_sampler(tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    argv = sampler_argv(sampler_script(), [], 600, watch_stdin=True)
    argv[0] = sys.executable
    for how in ("stdin", "file"):
        proc = subprocess.Popen(
            [*argv, "--stop-file", str(stop)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdin is not None
        assert parse_samples(proc.stdout.readline())  # it runs
        if how == "stdin":
            proc.stdin.close()
        else:
            stop.touch()
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            if not proc.stdin.closed:
                proc.stdin.close()


def test_the_lifetime_cap_ends_the_sampler_by_itself() -> None:
    start = time.monotonic()
    text = _run_sampler(1)
    assert time.monotonic() - start < 25  # 1 s, not the 600 of the test above: bounded, however loaded
    assert 1 <= len(parse_samples(text)) <= 4


def test_gpus_from_a_real_nvidia_smi_query_by_field_name() -> None:
    text = _fixture("gpu-utils-issue83-rtx2080-noheader-nounits-19-fields.txt")
    gpus = nodesampler.parse_gpu_csv(text, RTX2080_FIELDS)
    assert gpus == [
        {
            "index": 0,
            "util": 0.86,
            "mem_used_bytes": None,  # not asked for in that query
            "power_w": 176.98,
            "sm_clock_mhz": 1965.0,
            "throttle": None,
            "pcie_tx_Bps": None,
            "pcie_rx_Bps": None,
        }
    ]


def test_an_unknown_field_error_is_no_gpu_and_the_reader_tries_each_field_list_once(tmp_path: Path) -> None:
    error = _fixture("inference-snaps-issue89-compute-cap-invalid-field-error.txt")
    assert nodesampler.parse_gpu_csv(error, nodesampler.GPU_FIELDS) is None
    calls = tmp_path / "calls"
    fake = tmp_path / "nvidia-smi"  # a stand-in printing what an nvidia-smi that knows none of them prints
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\ncat <<'EOF'\n{error}EOF\n")
    fake.chmod(0o755)
    reader = nodesampler.GpuReader(str(fake))
    assert reader.read() is None and reader.read() is None
    assert len(calls.read_text().splitlines()) == 3  # each of the three field lists once, then no more
    assert nodesampler.GpuReader(str(tmp_path / "absent")).read() is None


def test_clock_event_reasons_are_named_from_nvmls_bits() -> None:
    assert nodesampler.throttle_reasons("0x0000000000000000") == []
    assert nodesampler.throttle_reasons("0x0000000000000044") == ["sw_power_cap", "hw_thermal_slowdown"]
    assert nodesampler.throttle_reasons("0x0000000000001001") == ["gpu_idle", "0x1000"]
    assert nodesampler.throttle_reasons("N/A") is None


def test_whole_disks_and_their_reads_from_this_machine() -> None:
    disks = nodesampler.whole_disks()
    text = Path("/proc/diskstats").read_text()
    if not disks:
        pytest.skip("no block device with a device link here")
    assert not any(name.startswith(("loop", "dm-", "ram")) for name in disks)
    read = nodesampler.parse_diskstats(text, disks)
    assert read is not None and read >= 0
    assert nodesampler.parse_diskstats(text, {"no-such-disk"}) is None


def test_no_nfs_mount_is_unknown_not_zero() -> None:
    mounts = Path("/proc/self/mountstats").read_text()
    if " with fstype nfs" in mounts:
        pytest.skip("this machine has an NFS mount")
    assert nodesampler.parse_mountstats(mounts) is None


def test_a_sampler_that_could_not_run_is_named_and_writes_no_file() -> None:
    files, unknown = telemetry_files(
        {"node1": _run_sampler(1), "node2": "sh: 1: python3: not found\n"},
        {"node3": "the sampler did not start: node3 (root@10.0.0.3:22): unreachable (timed out)."},
    )
    assert list(files) == ["node1"] and parse_samples(files["node1"])
    assert unknown["node2"][0] == "sampler: sh: 1: python3: not found"
    assert unknown["node3"][0].startswith("sampler: the sampler did not start: node3")
    assert "gpus" in unknown["node1"] and not any(u.startswith("sampler") for u in unknown["node1"])
    jsonl, other = split_output('{"t": 1}\nTraceback (most recent call last):\n{"t": "x"}\n')
    assert jsonl == '{"t": 1}\n' and other == ["Traceback (most recent call last):", '{"t": "x"}']
