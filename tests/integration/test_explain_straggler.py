"""`clusterctl explain` names a node made slow on purpose: on the 2-node sandbox, node2's ranks are
paused three quarters of the time (a throttler in node2's benchmark container sends them SIGSTOP and
SIGCONT, started through node2's own engine), and a real 2-node resnet50 run is explained with the
straggler code naming node2.

Why a pause and not busy loops beside the rank: busy loops on node2's CPU made the kernel's load
balancer move every unpinned process on the host (the other test session's ranks and builds) onto
node1's CPU, which then computed slower than node2 (once in a fresh-clone CI run, node1 was named).
A paused rank is slow by its own clock whatever else runs, and it leaves node2's CPU idle, not busy.
(A limit on the node container would not reach the container its inner engine runs; a CPU quota set
with ``docker update`` there was accepted but did not slow the rank on this cgroup v1 host.)"""

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
from tests.helpers.sandbox import Sandbox
from tests.helpers.strictjson import strict_loads

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
# Node2's ranks run 10 ms in every 40 ms: their compute four times slower by the wall clock than
# node1's, far past the straggler rule's margin (1.25). The throttler skips itself (its own command
# line names the script), ends by itself after THROTTLE_SECONDS (or with the container, which the
# ``cluster`` fixture removes), and lets every rank run again on the way out.
THROTTLE_SECONDS = 300
THROTTLER = f"""
import os, signal, time
def ranks():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as cmdline:
                if b"resnet50_bench" in cmdline.read() and int(pid) != os.getpid():
                    found.append(int(pid))
        except OSError:
            pass
    return found
def send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
end = time.monotonic() + {THROTTLE_SECONDS}
try:
    while time.monotonic() < end:
        pids = ranks()
        send(pids, signal.SIGSTOP)
        time.sleep(0.03)
        send(pids, signal.SIGCONT)
        time.sleep(0.01)
finally:
    send(ranks(), signal.SIGCONT)
"""


def _slow_down(inv: Inventory, node_name: str) -> None:
    """Start the throttler in ``node_name``'s benchmark container, through that node's engine."""
    node = next(n for n in inv.nodes if n.name == node_name)
    with contextlib.closing(docker_client(inv, node)) as client:
        (container,) = client.containers.list(filters={"label": f"{CLUSTER_LABEL}={inv.cluster.name}"})
        container.exec_run(["python", "-c", THROTTLER], detach=True)


def test_a_slowed_node_is_named_the_straggler(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    _slow_down(cluster, "node2")
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
