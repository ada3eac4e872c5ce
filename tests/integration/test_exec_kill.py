"""A timed-out exec is killed over a fresh connection, and a kill that fails is said (regression of ee9159f).

A 300 s run past its timeout was reported "killed" (exit 124) while mpirun and both ranks went on: the
kill went over the client that carried the long exec stream, whose connection was dead by then (see
``clusterctl.hosts.docker_remote``), and its error was suppressed. Here the stream's SSH session on the
node is frozen (SIGSTOP on its ``sshd: root@notty`` process: a peer that no longer answers, as a dropped
NAT entry or a hung node looks) once the command has started; the timeout must still kill the command,
in seconds, and say so. A kill over the stream's client would wait on the frozen session (minutes) and
leave the command running. Then the node's ``docker`` command is taken away, so no new engine connection
can be made: the timeout must say the command could NOT be killed, and it must indeed still run.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterctl.containers import lifecycle
from clusterctl.containers.plan import container_name
from clusterctl.hosts import container_exec
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import Sandbox, on_node

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Seconds the exec may run; the stream's session is frozen well before.
TIMEOUT_S = 5
# A bound on exec_in_container with the stream frozen: a kill sent over the frozen session blocks far longer.
BOUND_S = 45


def _sessions(sandbox: Sandbox, node: str) -> set[str]:
    """Pids of the node's SSH session processes (``sshd: root@notty``; never the listener)."""
    return set(on_node(sandbox, node, "pgrep", "-f", "^sshd: root@", check=False).split())


def _running(sandbox: Sandbox, node: str, marker: str) -> bool:
    """``marker`` is in a process's command line on the node (its containers' processes included)."""
    return any(marker in line for line in on_node(sandbox, node, "ps", "-eo", "args=").splitlines())


def _exec(cluster: Inventory, argv: list[str], on_line) -> BaseException | None:
    """Run ``exec_in_container`` on the primary within BOUND_S; what it raised."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(
            container_exec.exec_in_container,
            cluster,
            cluster.primary,
            argv,
            container=container_name(cluster, cluster.primary),
            env=None,
            timeout_s=TIMEOUT_S,
            on_line=on_line,
        )
        return future.exception(timeout=BOUND_S)


def test_a_timed_out_exec_is_killed_over_a_fresh_connection_and_a_failed_kill_is_said(
    cluster: Inventory, sandbox2: Sandbox
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    node = cluster.primary.name

    # 1. The stream's session frozen once the command runs: killed anyway, over a fresh connection.
    marker = f"sleep {3000 + uuid.uuid4().int % 1000}.5"
    frozen: set[str] = set()
    before = _sessions(sandbox2, node)

    def freeze(line: str) -> None:
        if line == "ready" and not frozen:
            frozen.update(_sessions(sandbox2, node) - before)
            on_node(sandbox2, node, "kill", "-STOP", *frozen)

    start = time.monotonic()
    try:
        raised = _exec(cluster, ["sh", "-c", f"echo ready; exec {marker}"], freeze)
        took = time.monotonic() - start
        assert len(frozen) == 1, f"expected the stream's one SSH session, found {frozen}"
        assert isinstance(raised, container_exec.ExecTimedOut), raised
        assert f"ran past {TIMEOUT_S} s and was killed." in str(raised)
        assert took < 30, f"the kill took {took:.0f} s"
        assert not _running(sandbox2, node, marker), f"{marker} still runs after it was reported killed"
    finally:
        if frozen:
            on_node(sandbox2, node, "kill", "-CONT", *frozen, check=False)

    # 2. No new engine connection can be made: the kill fails, and the result says so.
    marker = f"sleep {3000 + uuid.uuid4().int % 1000}.25"
    moved = threading.Event()

    def take_docker_away(line: str) -> None:
        if line == "ready" and not moved.is_set():
            on_node(sandbox2, node, "mv", "/usr/bin/docker", "/usr/bin/docker.away")
            moved.set()

    try:
        raised = _exec(cluster, ["sh", "-c", f"echo ready; exec {marker}"], take_docker_away)
        assert moved.is_set()
        assert isinstance(raised, container_exec.ExecTimedOut), raised
        text = str(raised)
        assert f"ran past {TIMEOUT_S} s and could NOT be killed (" in text and "it may still run" in text
        assert "was killed" not in text
        assert _running(sandbox2, node, marker), "reported not killed, yet it is gone"
    finally:
        if moved.is_set():
            on_node(sandbox2, node, "mv", "/usr/bin/docker.away", "/usr/bin/docker", check=False)
        on_node(sandbox2, node, "pkill", "-f", marker, check=False)
