"""The batch script at 256 nodes x 8 GPUs (issue 41, item 5): rendered from a 256-node inventory, it has
the same steps as the 2-node one (every step is one srun over all the job's nodes, never one per node),
names no node (Slurm allocates them; the nodes' outputs come back labelled), and is no longer.
bash -n accepts it.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.script import plan_batch
from clusterctl.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "inventories" / "modern-h100.yml"
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def h100_cluster(count: int) -> Inventory:
    """inventories/modern-h100.yml (8 x H100, 8 NDR rails a node) grown to ``count`` nodes, under Slurm."""
    document = load_yaml(H100)
    document["nodes"] = [
        {
            "name": f"hgx-{i:03d}",
            "address": f"10.20.{i // 250}.{i % 250 + 1}",
            **({"role": "primary"} if i == 0 else {}),
            "fabric": {"address": f"10.21.{i // 250}.{i % 250 + 1}/16"},
        }
        for i in range(count)
    ]
    document["slurm"] = {
        "login": {"address": "10.20.9.1"},
        "run_dir": "/shared/clusterctl",
        "runtime": "pyxis",
        "image": "nvcr.io#nvidia/pytorch:24.01-py3",
        "partition": "gpu",
    }
    return validate_document(document, H100)


def script(count: int) -> str:
    inventory = h100_cluster(count)
    return plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t").script


def steps(text: str) -> list[str]:
    """The srun command lines (job steps) of a batch script, in order."""
    lines = [line.strip() for line in text.splitlines() if re.match(r"\s*(\S+=\$\()?srun\s", line)]
    return [line for line in lines if "--help" not in line and "--version" not in line]


def test_256_nodes_of_8_gpus_render_the_2_node_scripts_steps_no_hostname_and_no_more_length(
    tmp_path: Path,
) -> None:
    small, large = script(2), script(256)
    assert "#SBATCH --nodes=256\n" in large and "#SBATCH --ntasks-per-node=8\n" in large
    assert "#SBATCH --nodes=2\n" in small
    assert steps(large) == steps(small) and len(steps(large)) == 4
    hostnames = {f"hgx-{i:03d}" for i in range(256)}
    assert [h for h in hostnames if h in large] == []
    assert len(large) <= len(small) + 16  # a few digits of counts differ, nothing per node
    path = tmp_path / "job.sh"
    path.write_text(large)
    subprocess.run(["bash", "-n", str(path)], check=True)
