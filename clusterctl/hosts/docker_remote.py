"""The docker SDK on a node's engine, reached over SSH with the node's verified host key.

The SDK's own ``ssh://`` transport reads ``~/.ssh/config`` and only the system known_hosts, so it
would use the admin's identity and reject the sandbox's or cluster's recorded keys. This module keeps
the SDK's transport (``docker system dial-stdio`` over a paramiko channel) but builds the paramiko
client the way ``clusterctl.hosts.ssh`` does: the inventory's identity, every known_hosts file the
cluster trusts, and unknown keys refused.

Large request bodies (``images.load``) must be a file object or an iterator, never one ``bytes``
value: paramiko's ``Channel.sendall`` copies the rest of the buffer after every packet, so a 120 MB
image sent as bytes takes hours; sent from a file object it takes about 4 s (found by the sandbox tests).

The SDK's ``SSHConnectionPool._get_conn`` leaves out urllib3's dropped-connection check (it would call
``fileno()`` on the paramiko channel, which costs a pipe per call), so a pooled HTTP connection whose
``dial-stdio`` channel the node has closed is handed out again, and the next request fails with
``('Connection aborted.', OSError('Socket is closed'))``. The node's engine closes an HTTP connection
idle for 300 s (measured on the sandbox's Docker 20.10), so any client that waits longer than that
between two requests on one connection meets it: the check after an image load of more than 5 minutes
(eight nodes at once took 436-480 s and all failed; four took 257 s and went through), the call after
a long exec stream.
``_CheckedSSHConnectionPool`` puts the check back, reading the channel's own state (no fd); a dead SSH
transport (a node rebooted, a keepalive lost) is replaced before the next request opens a channel on it.

That check cannot see a close that is still on its way: the node ends ``dial-stdio`` while the request
travels, the channel's EOF arrives after the check, and the reused connection fails with
``RemoteDisconnected`` (1 fresh-machine test run in 3). The pool therefore does what mature HTTP clients
do with stale keep-alive connections (urllib3's own dropped-connection check, Go's ``net/http``
retrying an idempotent request whose reused connection was closed under it): a GET or HEAD without a body
that failed on a *reused* connection is sent once more on a fresh channel, and counted
(``stale_retries``); a request on a fresh connection, or any other method (create, start, load, exec), is
never sent twice and fails as before. A connection idle for longer than ``IDLE_REUSE_S``, well under the
engine's 300 s, is closed rather than reused, so a reuse never races the engine's own idle close.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import paramiko
from docker.transport import SSHHTTPAdapter
from docker.transport.sshconn import SSHConnection, SSHConnectionPool
from urllib3.exceptions import ProtocolError

from clusterctl.errors import ConnectError
from clusterctl.hosts.ssh import host_key_changed, known_hosts_files
from clusterctl.inventory import Inventory, Node

# The oldest engine API clusterctl talks to (Docker 20.10, Debian bookworm's docker.io).
API_VERSION = "1.41"
# Seconds between SSH keepalives: a peer that vanished is noticed, and idle NAT entries stay open.
KEEPALIVE_S = 30
# Methods sent a second time when the reused connection they went out on was closed under them.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD"})
# A pooled connection idle longer than this is closed, not reused (the engine closes at 300 s).
IDLE_REUSE_S = 60.0
# The key of the adapter's one connection pool (see ``_VerifiedSSHAdapter.get_connection``).
ENGINE_POOL = "engine"
# Seconds one docker API call on a node may take (create, start, remove, inspect).
DOCKER_CALL_TIMEOUT_S = 60


def channel_dropped(conn: SSHConnection) -> bool:
    """The connection's ``dial-stdio`` channel was closed or ended by the node (never opened: False)."""
    channel = conn.sock
    return channel is not None and bool(channel.closed or channel.eof_received)


class _CheckedSSHConnectionPool(SSHConnectionPool):
    """The SDK's pool with the dropped-connection check its ``_get_conn`` leaves out, an idle bound on
    reuse, and one retry of an idempotent request whose reused connection was closed under it."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.stale_retries = 0  # idempotent requests sent again after their reused connection closed
        self._idle_since: weakref.WeakKeyDictionary[SSHConnection, float] = weakref.WeakKeyDictionary()
        self._attempt = threading.local()  # per calling thread: was the last connection handed out reused?

    def _get_conn(self, timeout: float | None = None) -> SSHConnection:
        conn = super()._get_conn(timeout)
        reused = conn.sock is not None
        idle_s = time.monotonic() - self._idle_since.pop(conn, time.monotonic())
        if reused and (
            channel_dropped(conn) or idle_s > IDLE_REUSE_S or getattr(self._attempt, "fresh", False)
        ):
            conn.close()  # drops the channel; the request opens a fresh one on the transport
            reused = False
        self._attempt.reused = reused
        return conn

    def _put_conn(self, conn: SSHConnection | None) -> None:
        if conn is not None:
            self._idle_since[conn] = time.monotonic()
        super()._put_conn(conn)

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        """Send the request; a GET/HEAD without a body whose reused connection was closed under it is
        sent once more on a fresh channel (while the SSH session lives). Any other failure is raised as
        it came, a dead SSH session as the connection error it is."""
        self._attempt.fresh = self._attempt.reused = False
        try:
            return self._send(method, url, *args, **kwargs)
        except ProtocolError:
            body = args[0] if args else kwargs.get("body")
            transport = self.ssh_transport
            alive = transport is not None and transport.is_active()
            if (
                method.upper() not in IDEMPOTENT_METHODS
                or body is not None
                or not self._attempt.reused
                or not alive
            ):
                raise
        self.stale_retries += 1
        self._attempt.fresh = True
        try:
            return self._send(method, url, *args, **kwargs)
        finally:
            self._attempt.fresh = False

    def _send(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().urlopen(method, url, *args, **kwargs)
        except EOFError as exc:
            # paramiko's packetizer says the SSH session died while the request was being written:
            # the same lost connection urllib3 reports for a closed socket (requests: ConnectionError).
            raise ProtocolError("Connection aborted.", exc) from None


class _VerifiedSSHAdapter(SSHHTTPAdapter):
    """docker SDK SSH adapter whose paramiko client uses clusterctl's identity and known_hosts."""

    def __init__(self, base_url: str, params: dict[str, object], known_hosts: list[Path], timeout: int):
        self._clusterctl_params = params
        self._clusterctl_known_hosts = known_hosts
        super().__init__(base_url, timeout=timeout)

    def _create_paramiko_client(self, base_url: str) -> None:
        self.ssh_client = paramiko.SSHClient()
        for path in self._clusterctl_known_hosts:
            self.ssh_client.get_host_keys().load(str(path))
        self.ssh_client.set_missing_host_key_policy(paramiko.RejectPolicy())
        self.ssh_params = dict(self._clusterctl_params)

    def _connect(self) -> None:
        super()._connect()
        transport = self.ssh_client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)

    def get_connection(self, url: str, proxies: object = None) -> _CheckedSSHConnectionPool:
        """The engine's one pool, on a live SSH transport (reconnected first when it died).

        One pool for every URL: the SDK keys its pools by the request's whole URL, so each endpoint
        (``/version``, ``/containers/<id>/json``, ...) opened and kept a ``dial-stdio`` channel of its own.
        """
        with self.pools.lock:
            transport = self.ssh_client.get_transport()
            if transport is None or not transport.is_active():
                self.pools.clear()  # their connections hold the dead transport
                self._connect()
            pool = self.pools.get(ENGINE_POOL)
            if pool is None:
                pool = _CheckedSSHConnectionPool(
                    ssh_client=self.ssh_client,
                    timeout=self.timeout,
                    maxsize=self.max_pool_size,
                    host=self.ssh_host,
                )
                self.pools[ENGINE_POOL] = pool
            return pool


def docker_client(inventory: Inventory, node: Node, *, timeout_s: int = 120) -> docker.DockerClient:
    """A docker SDK client for ``node``'s engine, over SSH as ``node.ssh.user``.

    Raises:
        ConnectError: the node is unreachable, its host key is unknown or changed, or login failed.
    """
    params: dict[str, object] = {
        "hostname": node.address,
        "port": node.ssh.port,
        "username": node.ssh.user,
        "timeout": node.ssh.connect_timeout_s,
        "banner_timeout": node.ssh.connect_timeout_s,
    }
    if node.ssh.identity_file:
        params.update(
            key_filename=str(Path(node.ssh.identity_file).expanduser()),
            look_for_keys=False,
            allow_agent=False,
        )
    base_url = f"ssh://{node.ssh.user}@{node.address}:{node.ssh.port}"
    try:
        adapter = _VerifiedSSHAdapter(base_url, params, known_hosts_files(inventory, node), timeout_s)
    except paramiko.BadHostKeyException as exc:
        raise host_key_changed(f"{node.name} ({node.address}:{node.ssh.port})", node, exc) from None
    except paramiko.SSHException as exc:
        raise ConnectError(
            f"{node.name} ({node.address}:{node.ssh.port}): cannot reach its Docker engine over SSH ({exc}). "
            "Fix: check the node is up and its host key is in a known_hosts file clusterctl reads."
        ) from None
    except OSError as exc:
        raise ConnectError(f"{node.name} ({node.address}:{node.ssh.port}): unreachable ({exc}).") from None
    # Built against a placeholder URL (no request is made when the version is fixed), then pointed at
    # the SSH adapter exactly as docker.APIClient does for its own ssh:// URLs.
    client = docker.DockerClient(base_url="tcp://127.0.0.1:9", version=API_VERSION, timeout=timeout_s)
    client.api.mount("http+docker://ssh", adapter)
    client.api._custom_adapter = adapter
    client.api.base_url = "http+docker://ssh"
    try:  # SSH answered; the engine behind `docker system dial-stdio` may not (stopped, crashed)
        client.ping()
    except (docker.errors.DockerException, paramiko.SSHException, OSError) as exc:
        client.close()
        raise ConnectError(
            f"{node.name} ({node.address}): SSH answers but its Docker engine does not ({exc}). Fix: start "
            f"the engine on {node.name} (`systemctl start docker`), check that `docker info` answers there, "
            "then re-run."
        ) from None
    return client


@contextlib.contextmanager
def node_engine(
    inventory: Inventory, node: Node, timeout_s: int = DOCKER_CALL_TIMEOUT_S
) -> Iterator[docker.DockerClient]:
    """``docker_client`` for ``node``'s engine, closed when the block ends.

    Raises:
        ConnectError: as ``docker_client``.
    """
    client = docker_client(inventory, node, timeout_s=timeout_s)
    try:
        yield client
    finally:
        client.close()
