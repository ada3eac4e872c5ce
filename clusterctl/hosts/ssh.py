"""SSH to the nodes over Fabric, with host keys verified and every call bounded.

Fabric installs paramiko's AutoAddPolicy in its constructor (fabric#2071): unknown host keys would be
accepted silently. ``connect`` replaces that policy before any connection is made, on the node's
connection and on every ProxyJump gateway Fabric builds from the admin's ``~/.ssh/config``. Host keys are
checked against the system's known_hosts files, the inventory's ``ssh.known_hosts`` and the cluster's
own known_hosts (where ``--accept-new-host-keys`` records new keys, appending, never rewriting).

Per-host outcomes are values (``CommandResult``): one host failing never stops the others. An
unreachable host is one line with its cause: paramiko's own log records (its transport thread logs a
failed banner read with two tracebacks) go nowhere, since the cause reaches the caller as an exception.

At scale (``fan_out``, the one place every per-node fan-out goes through): at most ``fanout()`` nodes
are worked on at once (``$CLUSTERCTL_FANOUT``, default ``DEFAULT_FANOUT``, as clush's ``-f``), each
node's deadline runs from when its own work starts (a queue of 128 nodes behind 32 slots is not cut
off at the first wave's deadline), and a node that does not answer is one result, never a wait for all.
An sshd past its ``MaxStartups`` (10 unauthenticated connections by default, e.g. a ProxyJump gateway
every node's connection goes through) drops new connections before its banner: ``connect`` retries
exactly that drop, with backoff (``STARTUP_RETRIES``), and no other failure.
"""

from __future__ import annotations

import logging
import math
import os
import random
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

import fabric
import paramiko
from invoke.exceptions import CommandTimedOut

from clusterctl.errors import ConnectError, InputError
from clusterctl.hosts.command import Command, CommandResult
from clusterctl.hosts.sshkeys import append_known_hosts, fingerprint, known_hosts_line
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import cluster_state_dir

# paramiko logs through the "paramiko" logger; without a handler Python's last resort prints its errors
# (tracebacks included) on stderr. Every cause it logs also reaches clusterctl as an exception.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

SYSTEM_KNOWN_HOSTS = (Path("~/.ssh/known_hosts"), Path("/etc/ssh/ssh_known_hosts"))
# How many nodes are worked on at once (pyinfra runs every host in parallel; a cap keeps the
# controller's threads, sockets and memory, and a gateway's sshd MaxStartups, in bounds on large
# clusters). clush's default is 64; bench/fanout_scale.py measured 32 as fast on this machine.
DEFAULT_FANOUT = 32
FANOUT_ENV = "CLUSTERCTL_FANOUT"
# A connection dropped before the banner (sshd past MaxStartups) is tried again this many times, after
# STARTUP_BACKOFF_S, doubled each time up to STARTUP_BACKOFF_MAX_S, with jitter (about 7 s in all): a
# storm's drops are random and each retry arrives when earlier connections have authenticated. 48
# connections at once to one sshd with the default MaxStartups all got in (tests/integration/
# test_fanout_sshd.py). A server that is not sshd and closes before any SSH banner looks the same from
# here, and costs those seconds before its one line.
STARTUP_RETRIES = 7
STARTUP_BACKOFF_S = 0.1
STARTUP_BACKOFF_MAX_S = 2.0

T = TypeVar("T")


def fanout() -> int:
    """How many nodes a fan-out works on at once: ``$CLUSTERCTL_FANOUT``, else ``DEFAULT_FANOUT``.

    Raises:
        InputError: the variable is not a whole number from 1 to 4096.
    """
    text = os.environ.get(FANOUT_ENV, "").strip()
    if not text:
        return DEFAULT_FANOUT
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise InputError(
            f"{FANOUT_ENV}={text!r}: the fan-out is how many nodes are worked on at once, a whole number "
            f"from 1 to 4096. Fix: unset it (default {DEFAULT_FANOUT}) or set e.g. {FANOUT_ENV}=64."
        )
    return int(text)


def startup_backoff(attempt: int) -> float:
    """Seconds before retry ``attempt`` (from 0) of a connection dropped before the banner, unjittered."""
    return min(STARTUP_BACKOFF_S * 2**attempt, STARTUP_BACKOFF_MAX_S)


def dropped_before_banner(exc: BaseException) -> bool:
    """Whether ``exc`` is an sshd closing the connection before its banner (MaxStartups, a full accept
    queue), the one connect failure worth trying again; a banner that timed out is not."""
    if not isinstance(exc, paramiko.SSHException) or not str(exc).startswith(
        "Error reading SSH protocol banner"
    ):
        return False
    return isinstance(exc.__context__, (EOFError, ConnectionResetError, BrokenPipeError))


def cluster_known_hosts(inventory: Inventory) -> Path:
    """The cluster's own known_hosts file (keys accepted with ``--accept-new-host-keys``)."""
    return cluster_state_dir(inventory.cluster.name) / "known_hosts"


_PARSED: dict[Path, tuple[tuple[int, int], paramiko.HostKeys]] = {}
_PARSED_LOCK = threading.Lock()


def parsed_known_hosts(path: Path) -> paramiko.HostKeys:
    """``path`` parsed, once per content (its size and modification time): each connection of a fan-out
    takes its own host's lines from here. Loading every file whole into every connection parsed N files'
    worth of keys N times: 42 ms of CPU per connection at 64 nodes, 10 s of CPU at 128."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    with _PARSED_LOCK:
        cached = _PARSED.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        keys = paramiko.HostKeys()
        keys.load(str(path))
        _PARSED[path] = (stamp, keys)
        return keys


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
    """An open Fabric connection to ``node`` with its host key verified; a connection the node's sshd
    dropped before its banner (MaxStartups) is tried again, with backoff, up to ``STARTUP_RETRIES`` times.

    Raises:
        ConnectError: unreachable, authentication failed, or the host key is unknown or changed.
    """
    for attempt in range(STARTUP_RETRIES + 1):
        try:
            return _connect_once(inventory, node, accept_new=accept_new)
        except (paramiko.SSHException, EOFError) as exc:
            if str(exc) == "No existing session":  # paramiko's start_client gave up waiting, silently
                raise _unreachable(
                    node, exc, f"; the SSH handshake did not finish within {node.ssh.connect_timeout_s:g} s: the "
                    f"node hangs or is overloaded, or this machine is (lower {FANOUT_ENV}, or raise "
                    "ssh.connect_timeout_s)"
                ) from None  # fmt: skip
            if not dropped_before_banner(exc):
                raise _unreachable(node, exc) from None
            if attempt == STARTUP_RETRIES:
                raise _unreachable(
                    node, exc, f"; closed before its banner {STARTUP_RETRIES + 1} times: an sshd past "
                    f"MaxStartups (raise it, or lower {FANOUT_ENV}), or not an SSH server"
                ) from None  # fmt: skip
            time.sleep(startup_backoff(attempt) * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")  # pragma: no cover


def _where(node: Node) -> str:
    return f"{node.name} ({node.ssh.user}@{node.address}:{node.ssh.port})"


def _unreachable(node: Node, exc: BaseException, detail: str = "") -> ConnectError:
    return ConnectError(f"{_where(node)}: unreachable ({exc or type(exc).__name__}{detail}).")


def _connect_once(inventory: Inventory, node: Node, *, accept_new: bool) -> fabric.Connection:
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
        # the name paramiko looks the server's key up by
        name = hop.host if hop.port == 22 else f"[{hop.host}]:{hop.port}"
        for path in files:
            for keytype, key in (parsed_known_hosts(path).lookup(name) or {}).items():
                host_keys.add(name, keytype, key)
        hop.client.set_missing_host_key_policy(policy)
        hop = hop.gateway
    where = _where(node)
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
    except OSError as exc:
        raise _unreachable(node, exc) from None
    except (paramiko.SSHException, EOFError):
        conn.close()
        raise  # connect decides: a drop before the banner is tried again
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

    # connect: its timeout, then the banner's, plus the MaxStartups retries' backoff
    connect_s = max(n.ssh.connect_timeout_s for n in nodes) * 2 + 5 if nodes else 0
    retries_s = 1.5 * sum(startup_backoff(a) for a in range(STARTUP_RETRIES))
    return fan_out(nodes, one, deadline_s=timeout_s + connect_s + retries_s)


def fan_out(
    nodes: Sequence[Node], work: Callable[[Node], T], *, deadline_s: float, parallel: int | None = None
) -> dict[str, T | CommandResult]:
    """Apply ``work`` to every node, at most ``parallel`` (default ``fanout()``) at once, each node
    under its own deadline of ``deadline_s`` from when its work starts.

    A node whose work has not finished by its deadline gets a ``CommandResult`` saying so, and the
    others go on; the whole call ends by ``deadline_s`` times the number of waves (nodes / parallel),
    even if every worker hangs.
    """
    if not nodes:
        return {}
    width = min(parallel or fanout(), len(nodes))
    started: dict[str, float] = {}
    lock = threading.Lock()

    def timed(node: Node) -> T:
        with lock:
            started[node.name] = time.monotonic()
        return work(node)

    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="clusterctl-ssh")
    futures: dict[Future[T], Node] = {pool.submit(timed, node): node for node in nodes}
    whole = deadline_s * math.ceil(len(nodes) / width)
    last = time.monotonic() + whole
    results: dict[str, T | CommandResult] = {}
    pending = set(futures)
    while pending:
        for future in [f for f in pending if f.done()]:
            results[futures[future].name] = future.result()
            pending.discard(future)
        now = time.monotonic()
        with lock:
            starts = {f: started[futures[f].name] for f in pending if futures[f].name in started}
        for future, start in starts.items():
            if now - start >= deadline_s:
                node = futures[future]
                results[node.name] = CommandResult(
                    node.name, "", None, error=f"no answer within {deadline_s:g} s"
                )
                pending.discard(future)
        if not pending or now >= last:
            break
        due = min([start + deadline_s for f, start in starts.items() if f in pending] + [last])
        wait(pending, timeout=max(due - now, 0.01), return_when=FIRST_COMPLETED)
    for future in pending:  # past the whole call's end; not started: the slots were held by nodes that hung
        node = futures[future]
        error = (
            f"no answer within {whole:g} s"
            if node.name in started
            else f"not started within {whole:g} s (every slot of the fan-out held by a node that did not answer)"
        )
        results[node.name] = CommandResult(node.name, "", None, error=error)
    pool.shutdown(wait=False, cancel_futures=True)
    return {node.name: results[node.name] for node in nodes}
