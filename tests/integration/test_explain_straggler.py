"""`clusterctl explain` names a node made slow on purpose: on the 2-node sandbox, node2's benchmark
container gets a CPU quota (``docker update`` through node2's own engine: a limit on the node container
would not reach the container its inner engine runs), and a real 2-node resnet50 run is explained with
the straggler code naming node2."""

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
# node2's benchmark container may use a quarter of one CPU per 100 ms period: its compute is several
# times slower than node1's whole share, far past the straggler rule's 1.15x.
QUOTA_US, PERIOD_US = 25_000, 100_000


def _throttle(inv: Inventory, node_name: str) -> None:
    """Give ``node_name``'s benchmark container a CPU quota, through that node's engine."""
    node = next(n for n in inv.nodes if n.name == node_name)
    with contextlib.closing(docker_client(inv, node)) as client:
        (container,) = client.containers.list(filters={"label": f"{CLUSTER_LABEL}={inv.cluster.name}"})
        container.update(cpu_quota=QUOTA_US, cpu_period=PERIOD_US)
        container.reload()
        assert container.attrs["HostConfig"]["CpuQuota"] == QUOTA_US


def test_a_throttled_node_is_named_the_straggler(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    _throttle(cluster, "node2")
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
    assert finding["evidence"]["slowest"] == "node2" and finding["evidence"]["ratio"] > 1.5
    assert finding["advice"]

    assert main(["explain", "--runs-dir", runs]) == 0
    screen = capsys.readouterr().out
    assert screen.splitlines()[0].startswith("straggler: node2 computes")
