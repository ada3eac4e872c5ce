"""SSH to the nodes over Fabric, with host keys verified and every call bounded.

Fabric installs paramiko's AutoAddPolicy in its constructor (fabric#2071): unknown host keys would be
accepted silently. ``connect`` replaces that policy before any connection is made, on the node's
connection and on every ProxyJump gateway Fabric builds from the admin's ``~/.ssh/config``. Host keys are
checked against the system's known_hosts files, the inventory's ``ssh.known_hosts`` and the cluster's
own known_hosts (where ``--accept-new-host-keys`` records new keys, appending, never rewriting).

Per-host outcomes are values (``CommandResult``): one host failing never stops the others. An
unreachable host is one line with its cause: paramiko's own log records (its transport thread logs a
failed banner read with two tracebacks) go nowhere, since the cause reaches the caller as an exception.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

import fabric
import paramiko
from invoke.exceptions import CommandTimedOut

from clusterctl.errors import ConnectError
from clusterctl.hosts.command import Command, CommandResult
from clusterctl.hosts.sshkeys import append_known_hosts, fingerprint, known_hosts_line
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import cluster_state_dir

# paramiko logs through the "paramiko" logger; without a handler Python's last resort prints its errors
# (tracebacks included) on stderr. Every cause it logs also reaches clusterctl as an exception.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

SYSTEM_KNOWN_HOSTS = (Path("~/.ssh/known_hosts"), Path("/etc/ssh/ssh_known_hosts"))
# How many nodes are worked on at once (pyinfra runs every host in parallel; a cap keeps the
# controller's threads and the nodes' sshd MaxStartups in bounds on large clusters).
MAX_PARALLEL = 32

T = TypeVar("T")


def cluster_known_hosts(inventory: Inventory) -> Path:
    """The cluster's own known_hosts file (keys accepted with ``--accept-new-host-keys``)."""
    return cluster_state_dir(inventory.cluster.name) / "known_hosts"


def known_hosts_files(inventory: Inventory, node: Node) -> list[Path]:
    """Every known_hosts file a node's key is checked against, existing ones only."""
    candidates = [*SYSTEM_KNOWN_HOSTS, cluster_known_hosts(inventory)]
    if node.ssh.known_hosts:
        candidates.append(Path(node.ssh.known_hosts))
    return [p.expanduser() for p in candidates if p.expanduser().is_file()]


class _UnknownHostKey(paramiko.MissingHostKeyPolicy):
    """Refuse an unknown host key, naming host and fingerprint; or, when asked, record it."""

    def __init__(self, record_to: Path | None):
        self.record_to = record_to

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        public = f"{key.get_name()} {key.get_base64()}"
        if self.record_to is None:
            raise ConnectError(
                f"{hostname}: unknown host key {key.get_name()} {fingerprint(public)}. Fix: verify the "
                "fingerprint on the node (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then re-run with "
                "--accept-new-host-keys or add the key to ~/.ssh/known_hosts."
            )
        host, _, port = hostname.removeprefix("[").partition("]:")
        append_known_hosts(self.record_to, [known_hosts_line([host], int(port or 22), public)])
        client.get_host_keys().add(hostname, key.get_name(), key)


def host_key_changed(where: str, node: Node, exc: paramiko.BadHostKeyException) -> ConnectError:
    """The refusal of a host key that differs from the recorded one, both fingerprints shown."""
    gateway = f" (ProxyJump gateway {exc.hostname})" if exc.hostname != node.address else ""
    got = fingerprint(f"{exc.key.get_name()} {exc.key.get_base64()}")
    known = fingerprint(f"{exc.expected_key.get_name()} {exc.expected_key.get_base64()}")
    return ConnectError(
        f"{where}: host key{gateway} CHANGED: got {got}, known {known}. Fix: if the node was reinstalled, "
        "remove its old line from known_hosts; otherwise treat this as an attack."
    )


def connect(inventory: Inventory, node: Node, *, accept_new: bool = False) -> fabric.Connection:
    """An open Fabric connection to ``node`` with its host key verified.

    Raises:
        ConnectError: unreachable, authentication failed, or the host key is unknown or changed.
    """
    connect_kwargs: dict[str, object] = {"banner_timeout": node.ssh.connect_timeout_s}
    if node.ssh.identity_file:
        connect_kwargs.update(
            key_filename=str(Path(node.ssh.identity_file).expanduser()),
            look_for_keys=False,
            allow_agent=False,
        )
    conn = fabric.Connection(
        host=node.address,
        user=node.ssh.user,
        port=node.ssh.port,
        connect_timeout=node.ssh.connect_timeout_s,
        connect_kwargs=connect_kwargs,
    )
    policy = _UnknownHostKey(cluster_known_hosts(inventory) if accept_new else None)
    files = known_hosts_files(inventory, node)
    hop: object = conn
    while isinstance(hop, fabric.Connection):  # the node, then each ProxyJump gateway of ~/.ssh/config
        host_keys = hop.client.get_host_keys()
        for path in files:
            host_keys.load(str(path))
        hop.client.set_missing_host_key_policy(policy)
        hop = hop.gateway
    where = f"{node.name} ({node.ssh.user}@{node.address}:{node.ssh.port})"
    try:
        conn.open()
    except ConnectError:
        raise
    except paramiko.BadHostKeyException as exc:
        raise host_key_changed(where, node, exc) from None
    except paramiko.AuthenticationException as exc:
        raise ConnectError(
            f"{where}: authentication failed ({exc}). Fix: check ssh.user and ssh.identity_file."
        ) from None
    except paramiko.ssh_exception.NoValidConnectionsError as exc:  # its text is "[Errno None] Unable to..."
        causes = sorted({getattr(e, "strerror", None) or str(e) for e in exc.errors.values()})
        raise ConnectError(f"{where}: unreachable ({'; '.join(causes)}).") from None
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise ConnectError(f"{where}: unreachable ({exc or type(exc).__name__}).") from None
    return conn


def as_shell(command: Command) -> str:
    """A command as one shell string; argument lists are quoted with shlex."""
    return command if isinstance(command, str) else shlex.join(command)


def run(conn: fabric.Connection, node: Node, command: Command, *, timeout_s: float) -> CommandResult:
    """Run ``command`` on an open connection; a non-zero exit or a timeout is a result, not an exception."""
    text = as_shell(command)
    start = time.monotonic()
    try:
        res = conn.run(text, hide=True, warn=True, timeout=timeout_s, in_stream=False)
    except CommandTimedOut as exc:
        return CommandResult(
            node.name, text, None, exc.result.stdout, exc.result.stderr, time.monotonic() - start,
            error=f"timed out after {timeout_s:g} s",
        )  # fmt: skip
    except (OSError, EOFError, paramiko.SSHException) as exc:
        return CommandResult(
            node.name,
            text,
            None,
            duration_s=time.monotonic() - start,
            error=f"connection lost: {exc}",
            unreachable=True,
        )
    if not conn.is_connected:  # the node went away while the command ran (stopped, rebooted, cable)
        return CommandResult(
            node.name, text, None, res.stdout, res.stderr, time.monotonic() - start,
            error="connection lost while the command ran", unreachable=True,
        )  # fmt: skip
    return CommandResult(node.name, text, res.exited, res.stdout, res.stderr, time.monotonic() - start)


def run_on_nodes(
    inventory: Inventory,
    nodes: Sequence[Node],
    command: Command | Callable[[Node], Command],
    *,
    timeout_s: float,
    accept_new: bool = False,
) -> dict[str, CommandResult]:
    """Run one command on every node in parallel; return each node's result by name.

    ``command`` may be a function of the node. Unreachable nodes get a result with ``unreachable``
    set and the reason in ``error``. The whole fan-out has a deadline: connect time plus ``timeout_s``.
    """

    def one(node: Node) -> CommandResult:
        cmd = command(node) if callable(command) else command
        try:
            conn = connect(inventory, node, accept_new=accept_new)
        except ConnectError as exc:
            return CommandResult(node.name, as_shell(cmd), None, error=str(exc), unreachable=True)
        with conn:
            return run(conn, node, cmd, timeout_s=timeout_s)

    return fan_out(nodes, one, deadline_s=timeout_s + max(n.ssh.connect_timeout_s for n in nodes) * 2 + 5)


def fan_out(
    nodes: Sequence[Node], work: Callable[[Node], T], *, deadline_s: float
) -> dict[str, T | CommandResult]:
    """Apply ``work`` to every node in parallel under one deadline.

    A node whose work has not finished by the deadline gets a ``CommandResult`` saying so.
    """
    if not nodes:
        return {}
    pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(nodes)), thread_name_prefix="clusterctl-ssh")
    futures = {pool.submit(work, node): node for node in nodes}
    done, _ = wait(futures, timeout=deadline_s)
    results: dict[str, T | CommandResult] = {}
    for future, node in futures.items():
        if future in done:
            results[node.name] = future.result()
        else:
            results[node.name] = CommandResult(
                node.name, "", None, error=f"no answer within {deadline_s:g} s"
            )
    pool.shutdown(wait=False, cancel_futures=True)
    return results
