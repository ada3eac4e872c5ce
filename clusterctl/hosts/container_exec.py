"""Exec in a node's benchmark container: the one primitive the ssh launcher (mpirun in the primary's
container) and the benches run commands with.

The command runs in its own session under ``setsid``, its pid recorded in the container and an
in-container ``timeout`` as a backstop; at the deadline or on Ctrl-C that whole session is killed
over a fresh connection. The caller names the container (``clusterctl.containers.plan.container_name``:
the name ``up`` gives it), so this connector knows no stage.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Sequence

import docker
import docker.errors

from clusterctl.errors import ClusterctlError, RunFailed, StepError
from clusterctl.hosts.docker_remote import DOCKER_CALL_TIMEOUT_S, docker_client, node_engine
from clusterctl.inventory import Inventory, Node

# The in-container `timeout` fires this long after the controller's own deadline (which normally wins).
BACKSTOP_GRACE_S = 30


class ExecTimedOut(RunFailed):
    """A command run with ``exec_in_container`` passed its timeout and was killed."""


def _exec_wrapper(argv: Sequence[str], pid_file: str, timeout_s: float) -> list[str]:
    """``argv`` in its own session (so one kill reaches all its children), with its pid recorded and
    ``timeout`` as a backstop in the container should the controller vanish."""
    script = 'echo $$ > "$0"; exec timeout -k 10 "$1" "${@:2}"'
    return ["setsid", "--wait", "bash", "-c", script, pid_file, f"{timeout_s + BACKSTOP_GRACE_S:g}", *argv]


def _kill_session(inventory: Inventory, node: Node, container_id: str, pid_file: str) -> str | None:
    """TERM, then KILL after 5 s, the process group whose leader's pid is in ``pid_file``.

    Over a fresh connection: the one that carried a long exec stream may be dead (see
    ``exec_in_container``), and a kill sent on it was lost without a word: a run past its timeout
    was reported killed while mpirun and every rank went on. Returns why the kill failed, or None.
    """
    script = (
        f'p=$(cat {shlex.quote(pid_file)} 2>/dev/null) || exit 0; kill -TERM -- -"$p" 2>/dev/null; '
        f'for _ in 1 2 3 4 5; do kill -0 -- -"$p" 2>/dev/null || exit 0; sleep 1; done; kill -KILL -- -"$p"'
    )
    try:
        with node_engine(inventory, node) as client:
            exec_id = client.api.exec_create(container_id, ["bash", "-c", script])["Id"]
            client.api.exec_start(exec_id)
            code = client.api.exec_inspect(exec_id)["ExitCode"]
    except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
        return str(exc)
    return None if code == 0 else f"the kill exited {code}"


def exec_in_container(
    inventory: Inventory,
    node: Node,
    argv: list[str],
    *,
    container: str,
    env: dict[str, str] | None,
    timeout_s: float,
    on_line: Callable[[str], None],
) -> int:
    """Run ``argv`` in the container named ``container`` on ``node``, streaming its output lines; return
    its exit code.

    stdout and stderr arrive interleaved, one ``on_line`` call per line (without the newline). The
    command runs in its own session in the container; on timeout or Ctrl-C that whole session is
    killed (TERM, then KILL) before this returns.

    Raises:
        ExecTimedOut: the command ran past ``timeout_s`` (it has been killed).
        StepError: the container is not on the node (run ``clusterctl up``).
        ConnectError: the node's engine is not reachable.
        KeyboardInterrupt: re-raised after the command was killed.
    """
    pid_file = f"/tmp/clusterctl-exec-{uuid.uuid4().hex}.pid"
    client = docker_client(inventory, node, timeout_s=int(timeout_s) + DOCKER_CALL_TIMEOUT_S)
    with contextlib.closing(client):
        try:
            found = client.containers.get(container)
        except docker.errors.NotFound:
            raise StepError(
                f"{node.name}: no benchmark container {container}. Fix: run `clusterctl up`."
            ) from None
        exec_id = client.api.exec_create(
            found.id,
            _exec_wrapper(argv, pid_file, timeout_s),
            environment=env or {},
            stdout=True,
            stderr=True,
        )["Id"]
        stream = client.api.exec_start(exec_id, stream=True)
        failure: list[BaseException] = []

        def pump() -> None:
            buffer = b""
            try:
                for chunk in stream:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        on_line(line.decode(errors="replace").rstrip("\r"))
                if buffer:
                    on_line(buffer.decode(errors="replace"))
            except Exception as exc:
                failure.append(exc)

        reader = threading.Thread(target=pump, name=f"clusterctl-exec-{node.name}", daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout_s
        try:
            while reader.is_alive() and time.monotonic() < deadline:
                reader.join(min(0.5, max(deadline - time.monotonic(), 0)))
        except KeyboardInterrupt:
            _kill_session(inventory, node, found.id, pid_file)
            raise
        if reader.is_alive():
            failed = _kill_session(inventory, node, found.id, pid_file)
            outcome = "was killed" if failed is None else f"could NOT be killed ({failed}); it may still run"
            raise ExecTimedOut(f"{node.name}: {shlex.join(argv)} ran past {timeout_s:g} s and {outcome}.")
        if failure:
            raise StepError(f"{node.name}: output stream of {shlex.join(argv)} broke: {failure[0]}")
    # A fresh connection for the calls after the stream: on the one that carried a long exec, the
    # next request failed with "Socket is closed" (paramiko) once the ranks had finished (seen twice
    # on the loaded sandbox, after 10-minute runs), turning a finished benchmark into a crash. The
    # pool's retry of a request whose reused channel closed under it (hosts/docker_remote.py) covers
    # the GET below but not the POST that creates the `rm` exec, which is never sent twice; and the
    # kill above must use a new SSH session anyway (test_exec_kill freezes the stream's session, on
    # which any new channel would hang too). So both keep their fresh connection.
    with node_engine(inventory, node) as after:
        with contextlib.suppress(docker.errors.DockerException):
            after.api.exec_start(after.api.exec_create(found.id, ["rm", "-f", pid_file])["Id"])
        code = after.api.exec_inspect(exec_id)["ExitCode"]
    return int(code) if code is not None else -1
