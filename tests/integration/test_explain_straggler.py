"""`clusterctl explain` names a node made slow on purpose: on the 2-node sandbox, node2's benchmark
container runs two busy loops beside its rank (started through node2's own engine: a limit on the node
container would not reach the container its inner engine runs; a CPU quota set with ``docker update``
there was accepted but did not slow the rank on this cgroup v1 host), and a real 2-node resnet50 run is
explained with the straggler code naming node2."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.containers.plan import CLUSTER_LABEL
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from tests.integration.conftest import Sandbox
from tests.strictjson import strict_loads

pytestmark = pytest.mark.integration

TINY = [
    "--framework",
    "ddp",
    "--steps",
    "4",
    "--warmup-steps",
    "1",
    "--batch-size",
    "2",
    "--image-size",
    "32",
]
# Two busy loops on node2's CPU share leave its rank about a third of it: its compute several times
# slower than node1's, far past the straggler rule's margin. Each loop ends by itself (and with the
# container, which the ``cluster`` fixture removes).
HOGS, HOG_SECONDS = 2, 300


def _load(inv: Inventory, node_name: str) -> None:
    """Start ``HOGS`` bounded busy loops in ``node_name``'s benchmark container, through that node's engine."""
    node = next(n for n in inv.nodes if n.name == node_name)
    with contextlib.closing(docker_client(inv, node)) as client:
        (container,) = client.containers.list(filters={"label": f"{CLUSTER_LABEL}={inv.cluster.name}"})
        for _ in range(HOGS):
            container.exec_run(["timeout", str(HOG_SECONDS), "sh", "-c", "while :; do :; done"], detach=True)


def test_a_loaded_node_is_named_the_straggler(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    _load(cluster, "node2")
    runs = str(tmp_path / "runs")
    code = main(["run", "resnet50", "-i", str(sandbox2.inventory_path), "--nodes", "2", *TINY,
                 "--runs-dir", runs, "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]

    assert main(["explain", "--runs-dir", runs, "--json"]) == 0
    explained = strict_loads(capsys.readouterr().out)
    assert explained["verdict"]["code"] == "straggler", explained["verdict"]
    (finding,) = [d for d in explained["diagnoses"] if d["code"] == "straggler"]
    assert finding["status"] == "found" and finding["node"] == "node2"
    assert finding["evidence"]["slowest"] == "node2" and finding["evidence"]["fastest"] == "node1"
    assert finding["advice"]

    assert main(["explain", "--runs-dir", runs]) == 0
    screen = capsys.readouterr().out
    assert screen.splitlines()[0].startswith("straggler: node2 computes")
