"""The payload run for real under Open MPI (2 ranks, Gloo DDP and Horovod), then recorded and reported."""

from __future__ import annotations

import csv
import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.inventory import Inventory
from clusterctl.results.history import history_path, load_runs
from clusterctl.results.record import read_record
from clusterctl.results.references import load_references
from clusterctl.results.report import build_report
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.compute import parse_peak_lines
from clusterctl.workloads.flops import resnet50_forward_macs
from clusterctl.workloads.resnet50 import parse_result_line
from tests.helpers.localrun import LocalMpirun, local_inventory
from tests.helpers.strictjson import report_rows

TINY = {"image_size": 32, "batch_size": 2, "steps": 2, "warmup_steps": 1, "display_every": 1}


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return local_inventory()


def _run(inventory: Inventory, runs_dir: Path, nodes: int, framework: str):
    plan = build_job(
        inventory,
        run_options(inventory, "resnet50", nodes=nodes, framework=framework, **TINY),
        get_workload("resnet50"),
    )
    lines: list[str] = []
    [(record, directory)] = run_plans(
        run_context(
            inventory, [plan], launcher=LocalMpirun(), timeout_s=240, runs_dir=runs_dir, on_line=lines.append
        )
    )
    assert lines, "the output was streamed line by line"
    return record, directory


@pytest.fixture(scope="module")
def ddp_runs(inventory: Inventory, tmp_path_factory: pytest.TempPathFactory):
    runs_dir = tmp_path_factory.mktemp("runs")
    one = _run(inventory, runs_dir, 1, "ddp")
    two = _run(inventory, runs_dir, 2, "ddp")
    return runs_dir, one, two


def test_ddp_two_ranks_report_world_size_2_and_positive_throughput(ddp_runs) -> None:
    _, _, (record, directory) = ddp_runs
    result = parse_result_line((directory / "output.log").read_text())
    assert result is not None
    assert result["world_size"] == 2
    assert result["framework"] == "ddp"
    assert result["total_images_per_sec"] > 0
    assert record.valid, record.findings
    assert record.fabric.transport == "none (CPU run, no NCCL)"


def test_run_directory_holds_the_contract_files(ddp_runs) -> None:
    _, _, (record, directory) = ddp_runs
    assert sorted(p.name for p in directory.iterdir()) == [
        "command.txt",
        "output.log",
        "result.json",
        "spec.json",
    ]
    assert directory.name.endswith("_resnet50_2n")
    assert (directory / "command.txt").read_text().startswith("mpirun -np 2 -H 127.0.0.1:1,127.0.0.2:1 ")
    assert json.loads((directory / "spec.json").read_text())["options"]["settings"]["batch_size"] == 2
    assert json.loads((directory / "result.json").read_text())["run_id"] == record.run_id


def test_history_and_report_show_the_runs_with_a_speedup(ddp_runs) -> None:
    runs_dir, (one, _), (two, _) = ddp_runs
    with sqlite3.connect(history_path(runs_dir)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs WHERE valid = 1").fetchone()[0] == 2
    rows = build_report(load_runs(runs_dir).runs, load_references())
    by_devices = {row.devices: row for row in rows}
    assert set(by_devices) == {1, 2}
    assert by_devices[1].speedup == pytest.approx(1.0)
    assert two.value is not None and one.value is not None
    assert by_devices[2].speedup == pytest.approx(two.value / one.value)
    assert by_devices[2].efficiency == pytest.approx(two.value / one.value / 2)


@pytest.mark.skipif(
    importlib.util.find_spec("horovod") is None,
    reason="horovod is not installed here (pip install --no-index --find-links ~/.cache/clusterctl/wheelhouse horovod==0.28.1)",
)
def test_horovod_two_ranks(inventory: Inventory, tmp_path: Path) -> None:
    record, directory = _run(inventory, tmp_path, 2, "horovod")
    result = parse_result_line((directory / "output.log").read_text())
    assert result is not None
    assert result["world_size"] == 2
    assert result["horovod_version"] == "0.28.1"
    assert record.valid, record.findings
    assert record.value is not None and record.value > 0


def test_every_run_records_achieved_flops_against_the_measured_cpu_peak(
    ddp_runs, capsys: pytest.CaptureFixture[str]
) -> None:
    runs_dir, one, two = ddp_runs
    for record, directory in (one, two):
        peak = parse_peak_lines((directory / "output.log").read_text())
        assert peak is not None and peak.ranks == record.world_size and peak.dtype == "float32"
        flops = read_record(directory).flops
        assert flops is not None and flops == record.flops
        assert flops.flops_per_sample == 6 * resnet50_forward_macs(TINY["image_size"])
        assert record.value is not None
        assert flops.achieved_tflops == pytest.approx(flops.flops_per_sample * record.value / 1e12)
        assert flops.achieved_tflops > 0
        assert flops.peak_source == "measured" and flops.precision == "fp32"
        assert flops.peak_tflops == peak.tflops_per_device > 0
        assert flops.mfu is not None and 0 < flops.mfu < 1
    assert main(["report", "--runs-dir", str(runs_dir), "--json"]) == 0
    rows = {row["devices"]: row for row in report_rows(capsys.readouterr().out)}
    assert rows[2]["mfu"] == two[0].flops.mfu and rows[2]["peak_source"] == "measured"
    csv_path = runs_dir.parent / "report.csv"
    assert main(["report", "--runs-dir", str(runs_dir), "--csv", str(csv_path)]) == 0
    by_devices = {row["devices"]: row for row in csv.DictReader(csv_path.open())}
    assert float(by_devices["1"]["mfu"]) == pytest.approx(one[0].flops.mfu)
    assert float(by_devices["1"]["achieved_tflops"]) == pytest.approx(one[0].flops.achieved_tflops)
