"""A job built as `run` builds it, on a shipped example inventory, for the workload tests."""

from __future__ import annotations

from pathlib import Path

from clusterctl.inventory import load_inventory
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.job import Job

ROOT = Path(__file__).resolve().parents[2]


def plan_on(example: str, workload: str, **overrides) -> Job:
    inventory = load_inventory(ROOT / "inventories" / example)
    options = run_options(inventory, workload, **overrides)
    return build_job(inventory, options, get_workload(workload))
