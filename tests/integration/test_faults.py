"""Faults injected into the session sandbox (issue 15, part 2), each with a bound and an assertion.

Host keys: an unknown node is refused (its fingerprint shown) unless ``--accept-new-host-keys``, and
then its key is appended to the cluster's known_hosts, never rewriting it; a changed key is refused
with both fingerprints, flag or not, over SSH and over the docker transport. The node's Docker engine
stopped: every command names that node and the fix. A secondary's container killed mid-run: the run
ends at once, names that node, exits 1, and after ``down`` nothing runs. SIGINT during a run: every
rank on every node is gone, the containers stay (``down`` is the user's call).

Faults covered elsewhere: a node stopped during provision (test_provision.py), sshd on the container
port not answering (test_lifecycle.py, the port squatter), SIGINT and SIGTERM during ``up``
(test_up_interrupt.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.errors import ConnectError
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.sshkeys import ensure_keypair, fingerprint
from clusterctl.inventory import Inventory, load_inventory
from tests.helpers.sandbox import Sandbox, benchmark_containers
from tests.helpers.strictjson import strict_loads

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Processes of a run: none may outlive it on any node (the node container sees its containers' processes).
RUN_PROCESSES = ("mpirun", "orted", "resnet50_bench")
# The run's telemetry sampler, on the node itself (python3 -c shows this marker, its first line).
SAMPLER = "clusterctl-nodesampler"


def _node(sandbox: Sandbox, node: str):
    return docker.from_env().containers.get(f"clusterctl-{sandbox.name}-{node}")


def _run_processes(sandbox: Sandbox, node: str, names: tuple[str, ...] = RUN_PROCESSES) -> list[str]:
    """The command lines of ``node``'s processes (its containers' included) that belong to a run."""
    result = _node(sandbox, node).exec_run(["ps", "-eo", "args="])
    assert result.exit_code == 0, result.output
    return [line for line in result.output.decode().splitlines() if any(p in line for p in names)]


def _wait_until(condition, what: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.2)


# --------------------------------------------------------------------------- host keys


def _with_known_hosts(sandbox: Sandbox, tmp_path: Path, lines: list[str]) -> Path:
    """A copy of the sandbox's inventory whose ``ssh.known_hosts`` holds only ``lines``."""
    known = tmp_path / "inventory_known_hosts"
    known.write_text("".join(line + "\n" for line in lines))
    text = sandbox.inventory_path.read_text()
    original = str(sandbox.state_dir / "sandbox" / "known_hosts")
    assert original in text
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(text.replace(original, str(known)))
    return inventory


def _recorded(sandbox: Sandbox, node: str) -> list[str]:
    """The sandbox's known_hosts lines of ``node`` (what `sandbox up` read from the node)."""
    known = (sandbox.state_dir / "sandbox" / "known_hosts").read_text().splitlines()
    address = sandbox.inventory.node(node).address
    return [line for line in known if address in line.split(" ", 1)[0].split(",")]


@pytest.fixture
def fresh_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory of the test's own: the cluster's known_hosts starts empty there."""
    state = tmp_path / "state"
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(state))
    return state


def _provision_dry(capsys: pytest.CaptureFixture[str], inventory: Path, *flags: str) -> tuple[int, dict]:
    code = main(["provision", "--dry-run", "--json", "-i", str(inventory), *flags])
    return code, strict_loads(capsys.readouterr().out)


def _reasons(report: dict, node: str) -> set[str]:
    return {s["reason"] for s in report["steps"] if s["node"] == node}


def test_unknown_host_is_refused_unless_accepted_and_known_hosts_is_only_appended(
    sandbox2: Sandbox, tmp_path: Path, fresh_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = _with_known_hosts(sandbox2, tmp_path, _recorded(sandbox2, "node1"))
    before_inventory_file = (tmp_path / "inventory_known_hosts").read_bytes()
    node2_fingerprints = {fingerprint(line.split(" ", 1)[1]) for line in _recorded(sandbox2, "node2")}

    code, report = _provision_dry(capsys, inventory)
    assert code == 1
    assert report["hosts"]["node1"]["unreachable"] == 0
    (reason,) = _reasons(report, "node2")
    assert "unknown host key" in reason and "--accept-new-host-keys" in reason
    assert any(fp in reason for fp in node2_fingerprints), reason

    # the cluster's known_hosts, with an entry of its own and a comment, is appended to, never rewritten
    cluster_known = fresh_state / "clusters" / sandbox2.name / "known_hosts"
    assert not cluster_known.exists()  # the refused key was not recorded
    cluster_known.parent.mkdir(parents=True, exist_ok=True)
    other = ensure_keypair(tmp_path / "other", "other")
    seeded = f"# kept as written\nother-host {' '.join(other.split()[:2])}\n"
    cluster_known.write_text(seeded)
    inode = cluster_known.stat().st_ino

    code, report = _provision_dry(capsys, inventory, "--accept-new-host-keys")
    assert code == 0, report
    after = cluster_known.read_text()
    assert cluster_known.stat().st_ino == inode and after.startswith(seeded)
    (added,) = after[len(seeded) :].splitlines()
    assert added.split()[0] == sandbox2.inventory.node("node2").address
    assert fingerprint(added.split(" ", 1)[1]) in node2_fingerprints

    code, report = _provision_dry(capsys, inventory)  # now known: no flag needed, nothing appended
    assert code == 0, report
    assert cluster_known.read_text() == after
    assert (tmp_path / "inventory_known_hosts").read_bytes() == before_inventory_file


def test_changed_host_key_is_refused_with_both_fingerprints_even_when_accepting_new(
    sandbox2: Sandbox, tmp_path: Path, fresh_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (real,) = [line for line in _recorded(sandbox2, "node2") if " ssh-ed25519 " in line]
    impostor = ensure_keypair(tmp_path / "impostor", "impostor")
    hosts = real.split()[0]
    inventory = _with_known_hosts(
        sandbox2, tmp_path, [*_recorded(sandbox2, "node1"), f"{hosts} {' '.join(impostor.split()[:2])}"]
    )
    recorded = (tmp_path / "inventory_known_hosts").read_bytes()
    got, known = fingerprint(real.split(" ", 1)[1]), fingerprint(impostor)

    for flags in ((), ("--accept-new-host-keys",)):
        code, report = _provision_dry(capsys, inventory, *flags)
        assert code == 1
        assert report["hosts"]["node1"]["unreachable"] == 0
        (reason,) = _reasons(report, "node2")
        assert f"host key CHANGED: got {got}, known {known}" in reason, reason
    changed = load_inventory(inventory)
    with pytest.raises(ConnectError) as refused:  # the docker transport (up, status) refuses it the same way
        docker_client(changed, changed.node("node2"))
    assert f"CHANGED: got {got}, known {known}" in str(refused.value)
    assert (tmp_path / "inventory_known_hosts").read_bytes() == recorded
    cluster_known = fresh_state / "clusters" / sandbox2.name / "known_hosts"
    assert not cluster_known.exists() or hosts.split(",")[0] not in cluster_known.read_text()


# --------------------------------------------------------------------------- the node's Docker engine


def test_a_stopped_docker_engine_is_named_with_the_fix(
    cluster: Inventory, sandbox2: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    node2 = _node(sandbox2, "node2")
    stop = node2.exec_run(["sh", "-c", "kill $(cat /var/run/docker.pid) && sleep 3 && ! docker info"])
    assert stop.exit_code == 0, stop.output
    try:
        for command in (["up", *inv], ["status", *inv, "--json"], ["down", *inv]):
            start = time.monotonic()
            assert main(command) == 1, command
            assert time.monotonic() - start < 60
            captured = capsys.readouterr()
            if "--json" in command:
                (text,) = [n["error"] for n in strict_loads(captured.out)["nodes"] if n["node"] == "node2"]
            else:
                text = " ".join((captured.out + captured.err).split())
            assert "node2 (" in text and "SSH answers but its Docker engine does not" in text, text
            assert "Fix: start the engine on node2" in text
        # up refused before touching any node
        client = docker_client(cluster, cluster.node("node1"))
        try:
            assert client.containers.list(all=True, filters={"label": "io.clusterctl.cluster"}) == []
        finally:
            client.close()
    finally:
        node2.exec_run(
            ["sh", "-c", "rm -f /var/run/docker.pid; exec dockerd >>/var/log/dockerd.log 2>&1"], detach=True
        )
        _wait_until(lambda: node2.exec_run(["docker", "info"]).exit_code == 0, "node2's dockerd back", 60)
    main(["status", *inv, "--json"])  # answers again (no container is up: status says so, exit 1)
    assert all(n["error"] is None for n in strict_loads(capsys.readouterr().out)["nodes"])


# --------------------------------------------------------------------------- runs


def _start_long_run(sandbox: Sandbox, runs: Path, timeout_s: int) -> subprocess.Popen:
    """`clusterctl run resnet50` on both nodes, long enough to be interrupted, in a child process."""
    return subprocess.Popen(
        [
            sys.executable, "-m", "clusterctl", "run", "resnet50", "-i", str(sandbox.inventory_path),
            "--steps", "100000", "--timeout", str(timeout_s), "--runs-dir", str(runs),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
    )  # fmt: skip


def test_secondary_container_killed_during_run_ends_it_naming_the_node(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    assert main(["up", *inv]) == 0
    timeout_s = 300
    proc = _start_long_run(sandbox2, tmp_path / "runs", timeout_s)
    try:
        _wait_until(lambda: _run_processes(sandbox2, "node2"), "the rank on node2", 120, proc)
        time.sleep(2)
        killed = _node(sandbox2, "node2").exec_run(["docker", "kill", f"clusterctl-{sandbox2.name}-node2"])
        assert killed.exit_code == 0, killed.output
        start = time.monotonic()
        out, _ = proc.communicate(timeout=timeout_s)
        ended_after = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == 1, out[-3000:]
    assert ended_after < 60, f"the run went on {ended_after:.0f} s after node2's container died"
    node2 = cluster.node("node2")
    # ORTE says "lost communication" or, when the kill meets orted still starting, "unable to start"
    assert f"daemon on node2 ({node2.fabric_ip}):" in " ".join(out.split()), out[-3000:]
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/result.json")]
    assert record["valid"] is False and record["exit_code"] not in (0, 124)

    assert main(["down", *inv]) == 0
    for node in ("node1", "node2"):
        assert _run_processes(sandbox2, node, (*RUN_PROCESSES, SAMPLER)) == [], node
    assert benchmark_containers(cluster) == {n.name: [] for n in cluster.nodes}


def test_sigint_during_run_leaves_no_rank_on_any_node(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    assert main(["up", *inv]) == 0
    proc = _start_long_run(sandbox2, tmp_path / "runs", 300)
    try:
        _wait_until(lambda: _run_processes(sandbox2, "node2"), "the rank on node2", 120, proc)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)  # the kill is TERM, then KILL after 5 s
    finally:
        proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out
    for node in ("node1", "node2"):  # orted and the rank on node2 die with their ssh link to mpirun
        _wait_until(lambda n=node: not _run_processes(sandbox2, n), f"{node}'s run processes gone", 30)
        assert _run_processes(sandbox2, node, (SAMPLER,)) == [], node  # stopped before clusterctl exited
    # the containers stay: the user asked for up, and only stopped the run
    assert all(
        len(found) == 1 and found[0][1] == "running" for found in benchmark_containers(cluster).values()
    )
