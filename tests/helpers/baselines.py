"""Site baselines for the tests of `baseline save`, the preflight and check pairs: the shipped inventories,
a real 2-node all_reduce_perf log, an inventory naming its baselines file, and a run directory holding a
record judged from the log."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from clusterctl.inventory import Inventory
from clusterctl.paths import data_dir
from clusterctl.results.record import RESULT_FILE
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import plan_run
from clusterctl.run.preflight import preflight_plans
from clusterctl.workloads import get_workload
from tests.fixtures import fixture_text

INVENTORIES = data_dir("inventories")
# A real 2-node, 16-GPU all_reduce_perf log: 1 GiB..16 GiB, its largest message at about 367 GB/s busbw.
NCCL_TESTS = "nccl_tests/oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt"


def with_baselines(tmp_path: Path, source: Path, extra: str = "") -> Path:
    """``source``'s inventory with ``baselines: site.yml`` (beside it, in ``tmp_path``)."""
    path = tmp_path / "inventory.yml"
    path.write_text(source.read_text() + f"\nbaselines: site.yml\n{extra}")
    return path


def run_dir_of(
    tmp_path: Path, inventory: Inventory, workload: str = "nccl-tests", log: str = NCCL_TESTS
) -> Path:
    """A run directory holding the record of a real 2-node all_reduce_perf log, judged on ``inventory``."""
    [plan] = preflight_plans(inventory, plan_run(inventory, "resnet50", nodes=2))
    record = judge_run(inventory, plan, get_workload(workload), fixture_text(log), 0, run_id="good",
                       started_at=datetime.now(UTC))  # fmt: skip
    directory = tmp_path / "good"
    directory.mkdir()
    (directory / RESULT_FILE).write_text(record.model_dump_json())
    return directory
