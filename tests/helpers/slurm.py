"""The sandbox's inventory with a Slurm section, and the batch script clusterctl renders for it: for the
tests of the batch script, its snapshots and the rendezvous."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.script import plan_batch
from clusterctl.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def slurm_inventory(**slurm: Any) -> Inventory:
    document = load_yaml(SANDBOX)
    document["slurm"] = {
        "login": {"address": "10.213.0.11"},
        "run_dir": "/shared/clusterctl",
        "runtime": "docker",
        "image": "clusterctl/sandbox:cpu-0123456789ab",
        **slurm,
    }
    return validate_document(document, SANDBOX)


def slurm_script(**slurm: Any) -> str:
    inventory = slurm_inventory(**slurm)
    return plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "abc123").script
