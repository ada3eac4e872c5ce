"""A run judged as the conductor judges it, from a real log, on the whitepaper's cluster (paper-c4140): for
the tests of run judgement and of MFU."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from clusterctl.inventory import load_inventory
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job

ROOT = Path(__file__).resolve().parents[2]


def paper_record(log: str, exit_code: int = 0):
    inventory = load_inventory(ROOT / "inventories" / "paper-c4140.yml")
    workload = get_workload("tf_cnn_benchmarks")
    plan = build_job(
        inventory, run_options(inventory, workload.name, nodes=1, ranks_per_node=1, batch_size=64), workload
    )
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = judge_run(
        inventory,
        plan,
        workload,
        log,
        exit_code,
        run_id="20260102T030405Z_tf_cnn_benchmarks_1n",
        started_at=started,
    )
    return inventory, plan, record
