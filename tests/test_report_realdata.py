"""The report keeps synthetic and real data apart (its own speedup group each) and carries a real-data
row's loader rate, input-bound verdict and time to target, in the table and the CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from rich.console import Console

from clusterctl.findings import Finding
from clusterctl.results.record import RunRecord
from clusterctl.results.report import build_report, report_csv
from clusterctl.results.report_table import print_report
from clusterctl.workloads.base import Metric
from clusterctl.workloads.resnet50 import ResNet50, epoch_metrics
from tests.helpers.records import V100, record


def _real(run_id: str, devices: int, value: float, *, loader: float, ttt: float, bound: bool) -> RunRecord:
    r = record(run_id, devices, value, config=V100.model_copy(update={"data": "real"}))
    r.metrics |= {
        "loader_images_per_sec": Metric(value=loader, unit="img/s"),
        "time_to_target_s": Metric(value=ttt, unit="s"),
    }
    if bound:
        r.findings.append(Finding(severity="warning", code="input-bound", message="input-bound"))
    return r


def test_real_and_synthetic_runs_are_separate_speedup_groups() -> None:
    runs = [
        record("s1", 1, 600.0), record("s4", 4, 2400.0),
        _real("r1", 1, 300.0, loader=900.0, ttt=50.0, bound=False),
        _real("r4", 4, 900.0, loader=1000.0, ttt=20.0, bound=True),
    ]  # fmt: skip
    rows = {(row.config.data, row.devices): row for row in build_report(runs, [])}
    assert rows[("synthetic", 4)].speedup == 4.0  # against the synthetic 1-device median only
    assert rows[("real", 4)].speedup == 3.0  # against the real 1-device median only
    assert rows[("real", 4)].input_bound is True and rows[("real", 1)].input_bound is False
    assert rows[("synthetic", 4)].input_bound is None
    assert rows[("real", 4)].time_to_target_s == 20.0 and rows[("real", 4)].loader_images_per_sec == 1000.0

    out = io.StringIO()
    print_report(list(rows.values()), Console(file=out, width=200), wide=True)
    text = out.getvalue()
    assert "[input-bound]" in text and "[keeps up]" in text and "20.0 s" in text and "real" in text
    table = list(csv.DictReader(io.StringIO(report_csv(list(rows.values())))))
    assert {row["data"] for row in table} == {"synthetic", "real"}
    assert any(row["time_to_target_s"] == "20.0" and row["input_bound"] == "True" for row in table)


def test_the_data_column_is_shown_first_where_a_row_is_real_and_only_then() -> None:
    synthetic = build_report([record("s1", 1, 600.0), record("s4", 4, 2400.0)], [])
    mixed = build_report(
        [record("s1", 1, 600.0), _real("r1", 1, 300.0, loader=900.0, ttt=50.0, bound=False)], []
    )
    for rows, shown in ((synthetic, False), (mixed, True)):
        out = io.StringIO()
        print_report(rows, Console(file=out, width=100))
        header = out.getvalue().splitlines()[1]
        assert (" data " in header) is shown


EPOCHS_LOG = Path(__file__).parent / "fixtures" / "realdata" / "epochs-1rank.log"


def test_the_cold_epoch_is_shown_beside_the_warm_ones_and_whether_the_cache_was_dropped() -> None:
    # A real 1-rank epochs run (3 epochs of 4 steps of 4 images; tests/fixtures/realdata/README.md).
    metrics = ResNet50().metrics(EPOCHS_LOG.read_text())
    assert metrics["images_per_sec[epoch 1]"].value == pytest.approx(16 / 6.144)
    assert metrics["cold_images_per_sec"].value == metrics["images_per_sec[epoch 1]"].value
    assert metrics["warm_images_per_sec"].value == pytest.approx((16 / 5.617 + 16 / 4.322) / 2)
    run = record("e1", 1, 3.0, config=V100.model_copy(update={"data": "real"}))
    run.metrics |= metrics
    dropped = run.model_copy(update={"run_id": "e2", "cache_dropped": True})
    for runs, mark in (([run], ""), ([dropped], " [dropped]")):
        (row,) = build_report(runs, [])
        assert row.cold_images_per_sec == pytest.approx(2.604, abs=1e-3)
        assert row.cache_dropped is bool(mark)
        out = io.StringIO()
        print_report([row], Console(file=out, width=200), wide=True)
        assert "cold/warm" in out.getvalue() and f"2.6/3.3{mark}" in out.getvalue()
        (line,) = csv.DictReader(io.StringIO(report_csv([row])))
        assert float(line["warm_images_per_sec"]) == pytest.approx(3.275, abs=1e-3)
    (synthetic,) = build_report([record("s1", 1, 600.0)], [])
    out = io.StringIO()
    print_report([synthetic], Console(file=out, width=200))
    assert "cold/warm" not in out.getvalue()  # no epochs run: the column is left out


def test_one_epoch_is_cold_with_no_warm_figure() -> None:
    one = {"batch_size": 4, "world_size": 2, "epochs": [{"epoch": 1, "steps": 3, "train_seconds": 2.0}]}
    metrics = epoch_metrics(one)
    assert metrics["cold_images_per_sec"].value == 12.0 and "warm_images_per_sec" not in metrics
    assert "cold_images_per_sec" not in epoch_metrics({"epochs": one["epochs"]})  # no batch: no rate
