"""Host keys of a ProxyJump gateway are verified like the node's (issue 15: Fabric accepted them unseen).

Two real SSH servers run on loopback in this process (paramiko's server side): a gateway that forwards
``direct-tcpip`` channels, and a node. The admin's ``~/.ssh/config`` (a temporary HOME) sends the node
through the gateway with ``ProxyJump``; clusterctl's ``connect`` builds real Fabric connections.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from clusterctl.errors import ConnectError
from clusterctl.hosts.ssh import cluster_known_hosts, connect
from clusterctl.hosts.sshkeys import fingerprint
from clusterctl.inventory import Inventory
from clusterctl.paths import STATE_DIR_ENV
from tests.helpers.sshserver import Keys, SshServer, one_node_inventory


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    """A key factory in the test's directory."""
    return Keys(tmp_path / "keys")


@pytest.fixture
def servers(
    tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SshServer, SshServer]]:
    """(gateway, node) servers; HOME holds an ssh config that reaches the node through the gateway."""
    gateway, node = (
        SshServer(keys.new(), "127.0.0.1", gateway=True),
        SshServer(keys.new(), "127.0.0.2", gateway=False),
    )
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    identity = keys.new()
    (home / ".ssh" / "config").write_text(
        f"Host 127.0.0.2\n    ProxyJump jumphost\n"
        f"Host jumphost\n    HostName 127.0.0.1\n    Port {gateway.port}\n    User root\n"
        f"    IdentityFile {identity}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    yield gateway, node
    gateway.close()
    node.close()


def _inventory(tmp_path: Path, keys: Keys, node: SshServer) -> Inventory:
    """One node at 127.0.0.2 (the node server's port), its host key in the inventory's known_hosts."""
    return one_node_inventory(tmp_path, keys, node, "127.0.0.2", "gw")


def test_an_unknown_gateway_key_is_refused_before_the_node_is_reached(
    tmp_path: Path, keys: Keys, servers: tuple[SshServer, SshServer]
) -> None:
    gateway, node = servers
    inventory = _inventory(tmp_path, keys, node)
    with pytest.raises(ConnectError) as refused:
        connect(inventory, inventory.nodes[0])
    assert f"[127.0.0.1]:{gateway.port}: unknown host key" in str(refused.value)
    assert fingerprint(gateway.public) in str(refused.value)
    assert gateway.forwards == [] and node.logins == 0


def test_a_recorded_gateway_key_lets_the_connection_through_the_gateway(
    tmp_path: Path, keys: Keys, servers: tuple[SshServer, SshServer]
) -> None:
    gateway, node = servers
    inventory = _inventory(tmp_path, keys, node)
    conn = connect(inventory, inventory.nodes[0], accept_new=True)  # records the gateway's key
    try:
        assert conn.gateway is not None and conn.gateway.port == gateway.port
        assert gateway.forwards == [("127.0.0.2", node.port)]
    finally:
        conn.close()
    assert node.logins == 1
    assert f"[127.0.0.1]:{gateway.port} {gateway.public}" in cluster_known_hosts(inventory).read_text()
    again = connect(inventory, inventory.nodes[0])  # now known: no --accept-new-host-keys needed
    again.close()
    assert node.logins == 2


def test_a_changed_gateway_key_is_refused_naming_the_gateway(
    tmp_path: Path, keys: Keys, servers: tuple[SshServer, SshServer]
) -> None:
    gateway, node = servers
    inventory = _inventory(tmp_path, keys, node)
    impostor = paramiko.Ed25519Key.from_private_key_file(str(keys.new()))
    path = cluster_known_hosts(inventory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[127.0.0.1]:{gateway.port} {impostor.get_name()} {impostor.get_base64()}\n")
    with pytest.raises(ConnectError, match=r"host key \(ProxyJump gateway 127.0.0.1\) CHANGED"):
        connect(inventory, inventory.nodes[0])
    assert node.logins == 0
