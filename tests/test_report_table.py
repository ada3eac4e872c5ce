"""The report table reads well at 80 columns (a pipe, or a small terminal): workload, devices, img/s,
speedup and efficiency are shown whole; what does not fit is named, and `--wide` shows every column."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from clusterctl.cli import main
from clusterctl.results.predict import predict_throughput
from clusterctl.results.record import RunRecord
from clusterctl.results.references import load_references
from clusterctl.results.report import ReportRow, build_report
from clusterctl.results.report_table import print_report
from tests.helpers.records import V100, record
from tests.helpers.rundirs import record_run

# The whitepaper's configuration: the longest workload name, and references to compare with.
PAPER = V100


def _record(run_id: str, devices: int, value: float, *, valid: bool = True) -> RunRecord:
    return record(run_id, devices, value, valid=valid, config=PAPER)


RECORDS = [
    _record("a", 1, 640.0),
    _record("b", 4, 2496.0),
    _record("c", 8, 4419.71),
    _record("d", 8, 1000.0, valid=False),
]


@pytest.fixture
def rows() -> list[ReportRow]:
    return build_report(RECORDS, load_references())


def _render(rows: list[ReportRow], width: int, *, wide: bool = False) -> str:
    buffer = io.StringIO()
    print_report(rows, Console(file=buffer, width=width, soft_wrap=True), wide=wide)
    return buffer.getvalue()


def _essentials(row: ReportRow) -> list[str]:
    """The values that must be legible: workload, devices, img/s, speedup, efficiency (as printed)."""
    assert row.median is not None and row.speedup is not None and row.efficiency is not None
    return [
        row.config.workload,
        str(row.devices),
        f"{row.median:,.1f} img/s",
        f"{row.speedup:.2f}x",
        f"{100 * row.efficiency:.1f}%",
    ]


def test_at_80_columns_the_essential_values_are_whole_on_one_line(rows: list[ReportRow]) -> None:
    text = _render(rows, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    for row in rows:
        values = _essentials(row)
        assert any(all(v in line for v in values) for line in lines), (values, text)
    assert "…" not in text


def test_left_out_columns_are_named_and_reference_verdicts_still_shown(rows: list[ReportRow]) -> None:
    text = _render(rows, 80)
    flat = " ".join(line.strip() for line in text.splitlines())  # the notes wrap at 80 columns
    assert re.search(r"left out to fit 80 columns: [a-z, ]*\breference \(--wide shows every column\)", flat)
    eight = next(r for r in rows if r.devices == 8)
    assert eight.comparisons, "the paper's 8-GPU run has a reference to compare with"
    verdicts = "; ".join(
        f"{c.metric} {c.observed:.2f} vs {c.expected:g} [{c.verdict}]" for c in eight.comparisons
    )
    assert f"reference: tf_cnn_benchmarks on 8 devices: {verdicts}" in flat


def test_a_wide_console_shows_every_column_and_no_note(rows: list[ReportRow]) -> None:
    text = _render(rows, 250)
    header = next(line for line in text.splitlines() if "workload" in line)
    for column in (
        "model",
        "framework",
        "precision",
        "batch",
        "device",
        "nodes",
        "runs",
        "spread",
        "reference",
    ):
        assert column in header
    assert "left out" not in text


def test_wide_shows_every_column_even_at_80(rows: list[ReportRow]) -> None:
    text = _render(rows, 80, wide=True)
    assert max(len(line) for line in text.splitlines()) > 80
    assert "reference" in next(line for line in text.splitlines() if "workload" in line)
    assert "left out" not in text


def test_report_command_piped_fits_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command, output captured (not a terminal): rich's width is then 80 columns."""
    monkeypatch.delenv("COLUMNS", raising=False)
    for run in RECORDS:
        record_run(tmp_path, run)
    assert main(["report", "--runs-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert any("tf_cnn_benchmarks" in line and "4,419.7 img/s" in line for line in out.splitlines())


def test_the_fabric_column_shows_gb_per_node_and_balance(rows: list[ReportRow]) -> None:
    rows[-1].fabric_gb_per_node, rows[-1].rail_balance = 1.234, 0.5
    text = _render(rows, 80, wide=True)
    header, *_ = (line for line in text.splitlines() if "workload" in line)
    assert "fabric" in header
    assert "1.23 GB/node bal 0.50" in text


def test_measured_over_predicted_is_shown_beside_the_median_at_80_columns(rows: list[ReportRow]) -> None:
    eight = next(r for r in rows if r.devices == 8)
    eight.predicted = predict_throughput(
        single_device=640.0, batch_size=64, devices=8, gradient_bytes=102_228_128, bus_bandwidth_gb_s=10.0
    )
    lines = _render(rows, 80).splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "workload" in line)
    assert "meas/pred" in header
    ratio = f"{4419.71 / eight.predicted.full_overlap:.2f}-{4419.71 / eight.predicted.no_overlap:.2f}"
    assert any("4,419.7 img/s" in line and ratio in line for line in lines), "\n".join(lines)
    wide = _render(rows, 80, wide=True)
    assert f"{eight.predicted.no_overlap:,.1f}-{eight.predicted.full_overlap:,.1f} img/s" in wide


def test_columns_no_run_can_fill_take_no_room_and_are_not_named(rows: list[ReportRow]) -> None:
    text = _render(rows, 80)
    assert "meas/pred" not in text and "predicted" not in text and "fabric" not in text
    assert "precision" in next(line for line in text.splitlines() if "workload" in line)


def test_each_multi_device_row_says_what_it_means_in_a_sentence(rows: list[ReportRow]) -> None:
    from clusterctl.results.report_table import meaning

    assert meaning(rows[0]) is None  # 1 device: nothing to judge
    assert meaning(rows[1]) == (
        "tf_cnn_benchmarks on 4 devices: 3.90x, 98% efficiency; no collective measured at 4 devices, so "
        "nothing says what this cluster should give (`clusterctl run allreduce` or `--preflight` measures it)."
    )
    # 102 MB of gradients at 10 GB/s: 0.015 s of allreduce beside 0.4 s of compute per step
    rows[2].predicted = predict_throughput(
        single_device=640, batch_size=256, devices=8, gradient_bytes=102_000_000, bus_bandwidth_gb_s=10.0
    )
    rows[2].prediction_verdict = rows[2].predicted.verdict(4419.71)
    assert rows[2].step is not None  # the step the report made: the 1-device compute, no exchange yet
    rows[2].step = rows[2].step.model_copy(update={"allreduce_s": rows[2].predicted.allreduce_s,
                                                   "bus_bandwidth_gb_s": 10.0})  # fmt: skip
    sentence = meaning(rows[2])
    assert sentence is not None and sentence.startswith(
        "tf_cnn_benchmarks on 8 devices: 6.91x, 86% efficiency; "
    )
    # no breakdown: the 1-device compute, said so, and no cause named (explain has none to give)
    assert (
        "4,420 img/s is below the range the 1-device compute and the measured collective predict" in sentence
    )
    assert (
        "per step: 0.4 s of compute at the 1-device rate (no breakdown recorded), 0.0179 s of allreduce at 10 GB/s;"
        in sentence
    )
    assert " limit" not in sentence
    out = _render(rows, 80)
    assert sentence[:60] in out.replace("\n", " ")
