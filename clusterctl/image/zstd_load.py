"""The image stream compressed with zstd on the controller, decompressed into ``docker load`` on a node.

Debian's docker.io 20.10 cannot ``docker load`` a zstd stream itself, so the node runs ``zstd -dc |
docker load`` (bash with ``pipefail``: either side failing fails the load) on an SSH exec channel of
``clusterctl.hosts.ssh.connect`` (the cluster's identity, host key verified), and the controller
compresses with the ``zstandard`` library (libzstd, multi-threaded), once for every node
(``clusterctl.image.spool``). ``NODE_TOOLS_PROBE`` finds out in
one command whether the node has what that needs; ``choose`` picks the way from its answer.

Closing the channel (on any failure or interruption on the controller) ends the node's pipeline:
sshd closes zstd's input, zstd stops at the cut frame and exits 1, and ``docker load`` then reads the
end of its input and exits. Nothing is left running on the node.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
from collections.abc import Callable, Iterable
from typing import Literal

import fabric
import paramiko

from clusterctl.errors import StepError
from clusterctl.hosts.docker_remote import KEEPALIVE_S
from clusterctl.hosts.ssh import run
from clusterctl.inventory import Node

# What the node needs for the compressed way.
NODE_TOOLS = frozenset({"zstd", "docker", "bash"})
# One read-only command: the path of each of NODE_TOOLS the node's shell finds, one a line.
NODE_TOOLS_PROBE = ["sh", "-c", 'for tool in zstd docker bash; do command -v "$tool"; done; true']
PROBE_TIMEOUT_S = 30
# The node's side: decompress into docker load; the exit status is the first failure of either.
REMOTE_LOAD = ["bash", "-o", "pipefail", "-c", "zstd -dc | docker load"]
# Seconds to wait for the node's exit status and output once sending failed (its side has ended).
AFTER_FAILURE_S = 10
# Characters of the node's output kept for an error message (the end, where the reason is).
OUTPUT_TAIL = 2000

Compression = Literal["zstd", "none"]


def parse_node_tools(text: str) -> frozenset[str]:
    """The tools found by ``NODE_TOOLS_PROBE``, from its output (absolute paths, one a line).

    ``"/usr/bin/zstd\\n/usr/bin/docker\\n/usr/bin/bash\\n"`` -> ``{"zstd", "docker", "bash"}``. Lines that
    are not absolute paths (a shell function or alias of that name) do not count.
    """
    return frozenset(
        line.rsplit("/", 1)[1] for line in (raw.strip() for raw in text.splitlines()) if line.startswith("/")
    )


def choose(setting: Literal["auto", "none"], node_tools: frozenset[str] | None) -> Compression:
    """``zstd`` when compression is allowed (``auto``) and the node has every one of NODE_TOOLS.

    ``node_tools`` None means the probe could not tell: the plain stream, which needs nothing more.
    """
    if setting == "auto" and node_tools is not None and node_tools >= NODE_TOOLS:
        return "zstd"
    return "none"


def probe_node_tools(conn: fabric.Connection, node: Node) -> frozenset[str] | None:
    """Which of NODE_TOOLS the node has; None when the probe could not run or finish."""
    result = run(conn, node, NODE_TOOLS_PROBE, timeout_s=PROBE_TIMEOUT_S)
    return parse_node_tools(result.stdout) if result.ok else None


def load_failed(node: str, exit_status: int | None, output: str, cause: str | None = None) -> StepError:
    """The error of a compressed load: the node's exit status and what it printed (the end of it)."""
    said = output.strip()[-OUTPUT_TAIL:] or cause or "no output"
    ended = "gave no exit status" if exit_status is None else f"exited {exit_status}"
    return StepError(f"{shlex.join(REMOTE_LOAD)} on {node} {ended}: {said}")


def _drain(channel: paramiko.Channel) -> tuple[int | None, str]:
    """Read the node's output to its end and its exit status, each read bounded by the channel's timeout."""
    output = b""
    with contextlib.suppress(OSError):
        while chunk := channel.recv(1 << 15):
            output = (output + chunk)[-4 * OUTPUT_TAIL :]
    status = channel.exit_status if channel.status_event.wait(channel.gettimeout()) else None
    return status, output.decode(errors="replace")


def load_compressed(
    conn: fabric.Connection,
    node: Node,
    chunks: Iterable[bytes],
    on_bytes: Callable[[int], None],
    *,
    timeout_s: float,
) -> None:
    """Send ``chunks`` (a zstd-compressed ``docker save`` stream) into ``zstd -dc | docker load`` on
    ``node``.

    ``on_bytes`` gets the size of every piece sent. ``timeout_s`` bounds every wait on the
    node (reading what is sent, loading after the end, its output).

    Raises:
        StepError: the node's pipeline failed; the message carries its exit status and output.
        OSError, paramiko.SSHException: the connection failed.
    """
    transport = conn.client.get_transport()
    if transport is None:
        raise StepError(f"{node.name}: the SSH connection closed before the compressed load")
    transport.set_keepalive(KEEPALIVE_S)
    with contextlib.closing(transport.open_session(timeout=timeout_s)) as channel:
        channel.settimeout(timeout_s)
        channel.set_combine_stderr(True)
        channel.exec_command(shlex.join(REMOTE_LOAD))

        def send(data: bytes) -> None:
            if data:
                channel.sendall(
                    memoryview(data)
                )  # a view: paramiko re-slices what is left after every packet
                on_bytes(len(data))

        try:
            for chunk in chunks:
                send(chunk)
            channel.shutdown_write()
        except (OSError, paramiko.SSHException) as exc:  # the node stopped reading; its output says why
            channel.settimeout(AFTER_FAILURE_S)
            status, output = _drain(channel)
            cause = f"stopped reading for {timeout_s:g} s" if isinstance(exc, socket.timeout) else str(exc)
            raise load_failed(node.name, status, output, cause) from None
        status, output = _drain(channel)
    if status != 0:
        raise load_failed(
            node.name, status, output, None if status is not None else f"silent for {timeout_s:g} s"
        )
