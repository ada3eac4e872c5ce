"""The report: grouping, median and spread, speedup, efficiency, references, CSV and the plot."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from clusterctl.diagnostics.parsers.fabric_counters import PortBytes
from clusterctl.results.counters import CounterProof, NodeTraffic
from clusterctl.results.plot import plot_report
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report, report_csv
from clusterctl.results.report_table import amount
from tests.helpers.records import PAPER_RUNS, V100, record


def rows_by_devices():
    return {row.devices: row for row in build_report(PAPER_RUNS, load_references())}


def test_median_spread_and_invalid_runs() -> None:
    one = rows_by_devices()[1]
    assert (one.runs, one.median, one.minimum, one.maximum) == (3, 640.0, 630.0, 650.0)
    assert one.spread_pct == pytest.approx(100 * 20 / 640)
    eight = rows_by_devices()[8]
    assert (eight.runs, eight.invalid_runs, eight.median) == (1, 1, 4419.71)


def test_speedup_and_efficiency_against_the_one_device_median() -> None:
    rows = rows_by_devices()
    assert rows[4].speedup == pytest.approx(3.9)
    assert rows[8].speedup == pytest.approx(4419.71 / 640)
    assert rows[8].efficiency == pytest.approx(4419.71 / 640 / 8)


def test_whitepaper_references_are_compared_with_their_tolerances() -> None:
    rows = rows_by_devices()
    assert [(c.metric, c.verdict) for c in rows[4].comparisons] == [("speedup", "within")]
    verdicts = {c.metric: c.verdict for c in rows[8].comparisons}
    assert verdicts == {"speedup": "within", "efficiency": "within"}
    assert rows[1].comparisons == []


def test_references_do_not_apply_to_other_configurations() -> None:
    cpu = V100.model_copy(update={"device": "cpu", "precision": "fp32"})
    rows = build_report(
        [record("x", 1, 10.0, config=cpu), record("y", 2, 15.0, config=cpu)], load_references()
    )
    assert [r.comparisons for r in rows] == [[], []]
    assert rows[1].speedup == pytest.approx(1.5)


def test_no_one_device_run_means_no_speedup() -> None:
    rows = build_report([record("d", 4, 2496.0)], load_references())
    assert rows[0].speedup is None and rows[0].efficiency is None


def test_csv_has_one_line_per_row() -> None:
    text = report_csv(build_report(PAPER_RUNS, load_references()))
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [int(line["devices"]) for line in lines] == [1, 4, 8]
    assert float(lines[1]["speedup"]) == pytest.approx(3.9)


def test_plot_writes_a_png(tmp_path: Path) -> None:
    path = plot_report(build_report(PAPER_RUNS, load_references()), tmp_path / "scaling.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("value", "label"), [(1.715, "1.72"), (13.829, "13.8"), (0.5, "0.5"), (2834.2, "2,834")]
)
def test_plot_labels_keep_small_throughputs_readable(value: float, label: str) -> None:
    assert amount(value) == label


def test_the_report_shows_the_bytes_each_node_moved_and_the_rail_balance() -> None:
    def proof(gb: float, idle_share: float) -> CounterProof:
        rails = {
            "mlx5_0:1": PortBytes(tx=int(gb * 1e9), rx=0),
            "mlx5_1:1": PortBytes(tx=int(idle_share * gb * 1e9), rx=0),
        }
        node = NodeTraffic(rails=rails)
        return CounterProof(
            fabric="HCA ports", nodes={"a": node, "b": node}, rail_balance=idle_share, valid=True
        )

    runs = [
        record("x", 8, 4000.0),
        record("y", 8, 4100.0),
        record("z", 8, 4200.0),
        record("w", 8, 10.0, valid=False),
    ]
    for run, (gb, share) in zip(runs, [(1.0, 0.9), (2.0, 0.8), (3.0, 1.0), (100.0, 0.0)], strict=True):
        run.counters = proof(gb, share)
    [row] = build_report(runs, [])
    assert row.fabric_gb_per_node == pytest.approx(2.0 * 1.8)  # median run: 2 GB + 1.6 GB sent per node
    assert row.rail_balance == 0.8  # the worst valid run; the invalid one does not count
    assert "fabric_gb_per_node" in report_csv([row]).splitlines()[0]


def test_ssh_and_slurm_runs_of_one_configuration_are_rows_side_by_side() -> None:
    slurm = [
        record("s1", 8, 4000.0).model_copy(update={"launcher": "slurm"}),
        record("s2", 8, 4200.0).model_copy(update={"launcher": "slurm"}),
    ]
    rows = build_report([*PAPER_RUNS, *slurm], load_references())
    assert [(r.devices, r.launcher) for r in rows] == [(1, "ssh"), (4, "ssh"), (8, "ssh"), (8, "slurm")]
    ssh8, slurm8 = rows[2], rows[3]
    assert (ssh8.runs, ssh8.median) == (1, 4419.71)
    assert (slurm8.runs, slurm8.median) == (2, 4100.0)
    # no 1-device run through slurm: its speedup is against the configuration's 1-device median
    assert slurm8.speedup == pytest.approx(4100.0 / 640)
    lines = list(csv.DictReader(io.StringIO(report_csv(rows))))
    assert [line["launcher"] for line in lines] == ["ssh", "ssh", "ssh", "slurm"]
    assert build_report(slurm, [])[0].model_dump(mode="json")["launcher"] == "slurm"  # report --json
