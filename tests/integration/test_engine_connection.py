"""The pooled engine connection over SSH against a node that closes its ``dial-stdio`` channel.

The node's engine closes an idle HTTP connection (its ``dial-stdio`` process ends); a close that lands
while a request is on its way reaches the client only after the pool's dropped-connection check, and
the request fails with ``RemoteDisconnected`` (1 fresh-clone test run in 3 before the retry). These tests
make the node close the channel at each moment it can (after the EOF has arrived; while the request is
out, with the engine frozen so no answer can slip through first; after an idle spell) and check that
idempotent requests go through, the retry is counted, and a POST is never sent twice.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest
import requests

from clusterctl.hosts.docker_remote import ENGINE_POOL, IDLE_REUSE_S, channel_dropped, docker_client
from tests.helpers.sandbox import Sandbox, on_node

pytestmark = pytest.mark.integration

# Rounds of the in-flight close per test run; CLUSTERCTL_STALE_ROUNDS=200 for the acceptance loop.
ROUNDS = int(os.environ.get("CLUSTERCTL_STALE_ROUNDS", "10"))
DIAL_STDIO = "docker system dial-stdio"


def _pool(client: docker.DockerClient) -> Any:
    """The one connection pool of ``client``'s SSH adapter, whatever URLs it was asked for."""
    adapter = client.api._custom_adapter
    assert list(adapter.pools.keys()) == [ENGINE_POOL]
    return adapter.pools[ENGINE_POOL]


def _pooled(client: docker.DockerClient) -> list[Any]:
    """The connections waiting in the pool that have opened a channel."""
    return [conn for conn in list(_pool(client).pool.queue) if conn is not None and conn.sock is not None]


def _wait_until_gone(sandbox: Sandbox, node: str, pattern: str) -> None:
    """Until no process on ``node`` matches ``pattern`` (a bounded wait: 10 s)."""
    deadline = time.monotonic() + 10
    while on_node(sandbox, node, "pgrep", "-f", pattern, check=False).strip():
        assert time.monotonic() < deadline, f"{pattern!r} still runs on {node} after 10 s"


@contextlib.contextmanager
def _closed_while_in_flight(sandbox: Sandbox, node: str, client: docker.DockerClient) -> Iterator[None]:
    """The next request goes out on the pooled connection, and the node closes that connection's
    channel after the request has left and before any answer: the engine is frozen (SIGSTOP) first,
    the ``dial-stdio`` process is ended once the request is sent, and the engine resumes after."""
    (conn,) = _pooled(client)
    sent = conn.getresponse

    def close_then_read(*args: Any, **kwargs: Any) -> Any:
        del conn.getresponse  # once: the retry reads its answer as usual
        on_node(sandbox, node, "pkill", "-f", DIAL_STDIO)
        _wait_until_gone(sandbox, node, DIAL_STDIO)
        on_node(sandbox, node, "pkill", "-CONT", "-x", "dockerd")
        return sent(*args, **kwargs)

    on_node(sandbox, node, "pkill", "-STOP", "-x", "dockerd")
    conn.getresponse = close_then_read
    try:
        yield
    finally:
        on_node(sandbox, node, "pkill", "-CONT", "-x", "dockerd")


def _in_flight_rounds(sandbox: Sandbox, request: Callable[[docker.DockerClient], object]) -> int:
    """``ROUNDS`` times: a request whose reused connection the node closes while it is out. Returns
    how often the pool sent a request again."""
    node = sandbox.inventory.nodes[0]
    with contextlib.closing(docker_client(sandbox.inventory, node)) as client:
        for _ in range(ROUNDS):
            client.version()  # a pooled connection with an open channel for the next request
            with _closed_while_in_flight(sandbox, node.name, client):
                request(client)
        return int(_pool(client).stale_retries)


def test_an_idempotent_request_whose_connection_closes_in_flight_is_sent_again(sandbox2: Sandbox) -> None:
    assert _in_flight_rounds(sandbox2, lambda client: client.version()["Version"]) == ROUNDS


def test_a_post_whose_connection_closes_in_flight_is_never_sent_again(sandbox2: Sandbox) -> None:
    failures = []

    def stop_a_container_that_is_not_there(client: docker.DockerClient) -> None:
        url = client.api._url("/containers/{0}/stop", "clusterctl-no-such-container")
        try:
            client.api._post(url)
        except requests.exceptions.ConnectionError as exc:
            failures.append(exc)

    assert _in_flight_rounds(sandbox2, stop_a_container_that_is_not_there) == 0
    assert len(failures) == ROUNDS  # each POST failed as it came, none was retried


def test_a_pooled_connection_whose_channel_the_node_closed_is_replaced(sandbox2: Sandbox) -> None:
    inv, node = sandbox2.inventory, sandbox2.inventory.nodes[0]
    with contextlib.closing(docker_client(inv, node)) as client:
        version = client.version()["Version"]
        on_node(sandbox2, node.name, "pkill", "-f", DIAL_STDIO)
        # The failure mode is there: every pooled connection's channel has been closed by the node...
        deadline = time.monotonic() + 10
        while not all(channel_dropped(conn) for conn in _pooled(client)):
            assert time.monotonic() < deadline, "the node's close did not reach every pooled channel in 10 s"
            time.sleep(0.05)
        # ...and the next request gets a fresh channel instead of "Socket is closed", with no retry.
        assert client.version()["Version"] == version
        assert _pool(client).stale_retries == 0


def test_a_connection_idle_past_the_bound_is_not_reused(sandbox2: Sandbox) -> None:
    inv, node = sandbox2.inventory, sandbox2.inventory.nodes[0]
    with contextlib.closing(docker_client(inv, node)) as client:
        client.version()
        (conn,) = _pooled(client)
        channel = conn.sock
        pool = _pool(client)
        pool._idle_since[conn] = time.monotonic() - IDLE_REUSE_S - 1  # as if idle past the bound
        client.version()
        assert channel.closed and conn.sock is not channel  # closed by the pool, a new channel opened
        client.version()
        assert _pooled(client)[0].sock is conn.sock  # a connection used within the bound is reused
        assert pool.stale_retries == 0


def test_a_dead_ssh_session_is_reconnected(sandbox2: Sandbox) -> None:
    inv, node = sandbox2.inventory, sandbox2.inventory.nodes[0]
    with contextlib.closing(docker_client(inv, node)) as client:
        client.ping()
        on_node(sandbox2, node.name, "pkill", "-f", "^sshd: root@")  # every session, never the listener
        transport = client.api._custom_adapter.ssh_client.get_transport()
        deadline = time.monotonic() + 5
        while transport.is_active():
            assert time.monotonic() < deadline, "the node's SSH session did not end in 5 s"
            transport.join(0.1)
        assert client.ping()
