"""Regression tests for the parser defects of issue 15: each input raised ValueError or took seconds.

Parsers never raise; they return their model with what they could not read left out or unparsed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.diagnostics import PARSERS, detect_kind, parse
from clusterctl.diagnostics import inspect as diagnostics_inspect
from clusterctl.diagnostics.inspect import inspect_file, inspect_text, output_text
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.ip_addr import parse_ip_addr
from clusterctl.diagnostics.parsers.nvidia_smi import parse_nvidia_smi
from clusterctl.diagnostics.parsers.tf_cnn_benchmarks import parse_tf_cnn_benchmarks

FIXTURES = Path(__file__).parents[1] / "fixtures"

HUGE = "9" * 5000  # over Python's 4,300-digit limit for int()
# Seconds for a 40 KB line; the defects took 15 to 23 s on one.
LINE_BOUND_S = 2.0


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("tf-cnn-benchmarks", f"{HUGE}\timages/sec: 1.0 +/- 0.0 (jitter = 0.0)\t7.0\n"),
        ("tf-cnn-benchmarks", "1\timages/sec: 1.2.3 +/- 0.0 (jitter = 0.0)\t7.0\ntotal images/sec: 4.5.6\n"),
        ("ibstat", "CA 'mlx5_0'\n\tNumber of ports: ²\n\tPort 1:\n"),
        ("ibstat", f"CA 'mlx5_0'\n\tNumber of ports: {HUGE}\nPort {HUGE}:\n"),
        (
            "horovod-synthetic",
            f"Batch size: {HUGE}\nIter #0: 1.2.3 img/sec per GPU\nTotal img/sec on {HUGE} GPU(s): 1..2\n",
        ),
        ("nvidia-smi", f"| {HUGE}  Tesla V100  On  | 00000000:1A:00.0 Off |\n|  {HUGE}MiB / 16GiB |\n"),
        ("ibv-devinfo", f"hca_id:\tmlx5_0\n\tport:\t{HUGE}\n\t\tstate:\t\tPORT_ACTIVE (4)\n"),
        ("ibstatus", f"Infiniband device 'mlx5_0' port {HUGE} status:\n\tstate:\t\t 4: ACTIVE\n"),
        ("mpi-error", f"process rank {HUGE} with PID 0 on node n1 exited\nExit code: {HUGE}\n"),
        ("nccl-tests", f"# Out of bounds values : {HUGE} OK\n"),
        ("tf-cnn-benchmarks", f"[{HUGE},0]<stdout>:1\timages/sec: 1.0 +/- 0.0 (jitter = 0.0)\t7.0\n"),
        ("ip-addr", f'[{{"ifindex": {HUGE}}}]'),
        ("ip-addr", "[" * 100_000),
    ],
)
def test_parser_returns_a_model_for_what_raised(kind: str, text: str) -> None:
    parsed = parse(kind, text)
    assert isinstance(parsed, Parsed) and isinstance(parsed.model_dump(), dict)


def test_numbers_that_cannot_be_read_are_left_out_not_guessed() -> None:
    tf = parse_tf_cnn_benchmarks(
        f"{HUGE}\timages/sec: 1.0 +/- 0.0 (jitter = 0.0)\t7.0\n1\timages/sec: 2.0 +/- 0.0 (jitter = 0.0)\t7.0\n"
    )
    assert [(s.step, s.images_per_sec) for s in tf.steps] == [(1, 2.0)]
    smi = parse_nvidia_smi(f"| {HUGE}  Tesla V100  On  | 00000000:1A:00.0 Off |\n")
    assert smi.gpus == []
    assert parse_ip_addr(f'[{{"ifindex": {HUGE}}}]').error is not None


@pytest.mark.parametrize(
    "line",  # a long line, or many blank ones
    [
        "9" * 40_000,  # kind detection: tf-cnn-benchmarks' step-line signature (23.5 s)
        "Port 1:" + " " * 40_000,  # tf_cnn_benchmarks' setting pattern
        "Batch size:" + "\t" * 40_000 + "x",
        "9" * 40_000 + "MiB",  # nvidia_smi's memory pattern
        "MLNX_OFED_LINUX-4.7" + "(OFED-4.7)" * 4_000,  # ofed_info's version pattern
        "x\n" + "\n" * 40_000,  # "^\s*" in kind detection ran across every following blank line (35 s)
        " \t\r\n" * 10_000,
    ],
)
def test_long_lines_are_linear(line: str) -> None:
    for name, read in [("detect", detect_kind), *PARSERS.items()]:
        start = time.process_time()  # CPU time: other work on the machine must not fail a linear parser
        read(line)
        assert time.process_time() - start < LINE_BOUND_S, name


def test_tf_settings_keep_their_value_without_trailing_blanks() -> None:
    parsed = parse_tf_cnn_benchmarks("Model:       resnet50   \nBatch size:  64 per device  \n")
    assert parsed.model == "resnet50" and parsed.batch_size_per_device == 64


def test_inspect_reads_only_regular_files_within_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)  # blocked forever
    big = tmp_path / "big.txt"
    big.write_text("NVIDIA-SMI 550.90.07\n" * 100)
    monkeypatch.setattr(diagnostics_inspect, "MAX_OUTPUT_BYTES", 1000)
    for path, expected in [
        (Path("/dev/zero"), "not a regular file"),  # read until memory ran out
        (fifo, "not a regular file"),
        (tmp_path, "is a directory"),
        (big, "limit of 1000 bytes"),
    ]:
        start = time.monotonic()
        assert main(["inspect", str(path)]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Fix: " in err and time.monotonic() - start < LINE_BOUND_S


def test_a_job_log_that_begins_with_an_nvidia_smi_banner_keeps_its_nccl_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that runs nvidia-smi before training, then fails in NCCL: two real captures, one log.

    It was detected as nvidia-smi (the banner's signature comes first), its NCCL errors were dropped
    and inspect exited 0 (issue 26, item 10).
    """
    smi = output_text((FIXTURES / "nvidia_smi" / "gpud-8xh100-550.90.07.txt").read_text())
    nccl = output_text(
        (FIXTURES / "nccl_errors" / "nccl-issue1405-net-ib-status12-vendor-err-129-roce.txt").read_text()
    )
    log = tmp_path / "job.log"
    log.write_text(smi + nccl)
    result = inspect_file(log)
    assert result.kind == "nvidia-smi" and result.also_read_as == ["nccl-log"]
    assert [f.code for f in result.findings if f.severity == "error"] == [
        f.code for f in inspect_text("nccl", nccl).findings if f.severity == "error"
    ]
    assert main(["inspect", str(log)]) == 1
    assert "also judged as nccl-log" in capsys.readouterr().out
    alone = inspect_text("smi", smi)
    assert alone.also_read_as == [] and not [f for f in alone.findings if f.severity == "error"]


@pytest.mark.parametrize(
    ("mtu", "below"), [("4096.0", False), ("2048.0", True), ("nan", False), ("1e999", False)]
)
def test_an_active_mtu_that_is_a_float_is_read_not_a_crash(mtu: str, below: bool) -> None:
    """``active_mtu: 4096.0`` (a real capture, its MTU rewritten) was an internal error (issue 26, item 7)."""
    text = output_text(
        (FIXTURES / "ibv_devinfo" / "felixfu-connectx3-4099-1port-active-newer-format.txt").read_text()
    )
    assert "active_mtu:\t\t4096 (5)" in text
    result = inspect_text("ibv", text.replace("4096 (5)", mtu))
    assert result.kind == "ibv-devinfo"
    assert any(f.code == "ib-mtu-below-4096" for f in result.findings) is below
