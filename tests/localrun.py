"""A real executor for tests: runs a plan's payload under the host's own Open MPI (no containers).

The plan's rank command is kept as built (so the workload's argv is what runs); only the mpirun
flags change to a single-host launch, the payload path points at this checkout, and the ranks run
this environment's own interpreter (``sys.executable``: the one with torch and horovod), not
whatever ``python`` comes first on PATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.plan import LaunchPlan
from clusterctl.run.runner import ExecResult

ROOT = Path(__file__).resolve().parents[1]
LOCAL_PAYLOAD_DIR = ROOT / "clusterctl" / "payload"


def local_inventory() -> Inventory:
    """Two CPU "nodes" on this host's loopback (127.0.0.1 and .2) for ``local_mpirun``."""
    document = {
        "cluster": {"name": "local", "defaults": {"gpus": {"count": 0}, "fabric": {"interface": "lo"}}},
        "nodes": [
            {"name": "node1", "address": "127.0.0.1", "role": "primary"},
            {"name": "node2", "address": "127.0.0.2"},
        ],
    }
    return validate_document(document, Path("local.yml"))


def local_mpirun(
    inventory: Inventory, plan: LaunchPlan, *, timeout_s: float, on_line: Callable[[str], None]
) -> ExecResult:
    """Run ``plan``'s rank command with ``mpirun -np <world size> --oversubscribe`` on this host."""
    del inventory
    rank_argv = list(plan.rank_argv)
    rank_argv[0] = sys.executable
    rank_argv[1] = str(LOCAL_PAYLOAD_DIR / rank_argv[1].removeprefix(f"{CONTAINER_PAYLOAD_DIR}/"))
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-np", str(plan.world_size)]
    rendezvous = {k: v for k, v in plan.env.items() if k.startswith("MASTER_")}
    env = {**os.environ, "OMP_NUM_THREADS": "1", **rendezvous}
    proc = subprocess.run(
        [*argv, *rank_argv], capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )
    output = proc.stdout + proc.stderr
    for line in output.splitlines():
        on_line(line)
    return ExecResult(proc.returncode, output)
