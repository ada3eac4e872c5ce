"""provision on a real 2-node sandbox: dry run changes nothing, the first run converges, the second
changes nothing, and a node stopped mid-run is reported unreachable while the other finishes."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.sandbox import cluster as sandbox_cluster
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration

MIDRUN_PLAYBOOK = """\
name: midrun
steps:
  - name: mark
    description: shows the run reached the node
    check: test -f /tmp/clusterctl-midrun-mark
    apply: touch /tmp/clusterctl-midrun-mark
  - name: slow
    description: long enough to stop a node while it runs
    check: test -f /tmp/clusterctl-midrun-slow
    apply: sleep 8 && touch /tmp/clusterctl-midrun-slow
  - name: after
    description: depends on the slow step
    depends_on: [slow]
    check: test -f /tmp/clusterctl-midrun-after
    apply: touch /tmp/clusterctl-midrun-after
"""


def _provision(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["provision", "--json", *args])
    return code, strict_loads(capsys.readouterr().out)


def _total(report: dict, status: str) -> int:
    return sum(counts[status] for counts in report["hosts"].values())


def _node_container(sandbox, node: str):
    return docker.from_env().containers.get(f"clusterctl-{sandbox.name}-{node}")


def _exec_ok(sandbox, node: str, command: str) -> bool:
    return _node_container(sandbox, node).exec_run(["bash", "-c", command]).exit_code == 0


def test_dry_run_then_converge_then_nothing_to_do(sandbox2, capsys: pytest.CaptureFixture[str]) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    limits = "/etc/security/limits.d/90-clusterctl-memlock.conf"
    assert not _exec_ok(sandbox2, "node1", f"test -f {limits}"), "the sandbox must start unprovisioned"

    code, dry = _provision(capsys, *inv, "--dry-run")
    assert code == 0 and dry["dry_run"] is True and dry["status_bundle"] is None
    assert _total(dry, "changed") == 0 and _total(dry, "would-change") >= 2 * 3
    would = {(s["node"], s["step"]) for s in dry["steps"] if s["status"] == "would-change"}
    assert ("node1", "memlock-limits") in would and ("node2", "cluster-ssh") in would
    for node in ("node1", "node2"):  # probing after the dry run: still nothing there
        assert not _exec_ok(sandbox2, node, f"test -f {limits}")
        assert not _exec_ok(
            sandbox2, node, f"test -f /root/.ssh/clusterctl-{sandbox2.inventory.cluster.name}"
        )

    code, first = _provision(capsys, *inv)
    assert code == 0, first
    assert _total(first, "changed") >= 2 * 3
    assert _total(first, "failed") == 0 and _total(first, "unreachable") == 0
    for node in ("node1", "node2"):  # the status capture is saved per host for check/inspect
        assert (Path(first["status_bundle"]) / node / "meta.json").is_file()
        assert (Path(first["status_bundle"]) / node / "ip-addr.txt").is_file()
    skipped = {s["step"]: s["reason"] for s in first["steps"] if s["status"] == "skipped"}
    assert {"mofed", "ipoib", "gpudirect-rdma", "nvidia-runtime"} <= set(skipped)
    assert all(skipped.values())

    # the cluster key now gives node-to-node SSH with strict host-key checking
    assert _exec_ok(sandbox2, "node1", "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes node2 true")

    code, second = _provision(capsys, *inv)
    assert code == 0
    assert _total(second, "changed") == 0 and _total(second, "would-change") == 0
    assert _total(second, "ok") == _total(first, "ok") + _total(first, "changed")


def _wait_for_port(host: str, port: int, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with socket.create_connection((host, port), timeout=1) as sock:
                if sock.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"sshd on {host}:{port} did not answer within {deadline_s} s")


def test_node_stopped_mid_run_is_unreachable_and_a_rerun_converges(sandbox2, tmp_path: Path) -> None:
    playbook = tmp_path / "midrun.yml"
    playbook.write_text(MIDRUN_PLAYBOOK)
    cmd = [
        sys.executable,
        "-m",
        "clusterctl",
        "provision",
        "--json",
        "-i",
        str(sandbox2.inventory_path),
        "--playbook",
        str(playbook),
    ]
    node2 = _node_container(sandbox2, "node2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not _exec_ok(sandbox2, "node2", "test -f /tmp/clusterctl-midrun-mark"):
            assert time.monotonic() < end, "the first step never reached node2"
            time.sleep(0.2)
        time.sleep(1)  # node2 is now inside the 8-second step
        node2.stop(timeout=1)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        node2.reload()
        if node2.status != "running":
            node2.start()
            # A restarted node container runs sshd and dockerd, not munge and slurmd: `sandbox up` again
            # brings them back (the session's other tests submit Slurm jobs to node2).
            sandbox_cluster.up(sandbox2.name, 2, slurm=True)
    assert proc.returncode == 1, err
    report = strict_loads(out)
    status = {(s["node"], s["step"]): s["status"] for s in report["steps"]}
    assert status[("node1", "slow")] == "changed" and status[("node1", "after")] == "changed"
    assert status[("node2", "slow")] == "unreachable" and status[("node2", "after")] == "unreachable"

    _wait_for_port(sandbox2.inventory.node("node2").address, 22, 60)
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr
    again = strict_loads(rerun.stdout)
    assert again["hosts"]["node1"]["changed"] == 0
    assert again["hosts"]["node2"]["failed"] == 0 and again["hosts"]["node2"]["unreachable"] == 0
    assert _exec_ok(sandbox2, "node2", "test -f /tmp/clusterctl-midrun-after")
