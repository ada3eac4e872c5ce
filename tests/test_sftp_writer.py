"""One safe SFTP writer for every upload (issue 15: the containers' SSH keys were written with mode "w",
through a symlink planted at their path). A real SFTP server on loopback serves a temporary directory
with OpenSSH's semantics, so a write through a planted symlink would really land in its target."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.hosts.cluster_keys import ensure_cluster_keys, node_ssh_dir, node_ssh_files
from clusterctl.hosts.sftp import write_file, write_private_dir
from clusterctl.hosts.ssh import connect
from clusterctl.inventory import Inventory
from clusterctl.paths import STATE_DIR_ENV
from tests.helpers.sshserver import Keys, SshServer, one_node_inventory

SECRET = b"the victim's own content\n"


@pytest.fixture
def node_root(tmp_path: Path) -> Path:
    """The node's file system as the SFTP server serves it."""
    root = tmp_path / "node"
    root.mkdir()
    return root


@pytest.fixture
def inventory(tmp_path: Path, node_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inventory]:
    """One node served by an SFTP-capable SSH server on 127.0.0.1, its host key known."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    keys = Keys(tmp_path / "keys")
    server = SshServer(keys.new(), "127.0.0.1", sftp_root=node_root)
    yield one_node_inventory(tmp_path, keys, server, "127.0.0.1", "c")
    server.close()


def _plant(node_root: Path, remote: str, victim: Path) -> Path:
    """A symlink at ``remote`` on the node pointing at ``victim`` (which holds SECRET)."""
    victim.write_bytes(SECRET)
    link = node_root / remote.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    return link


def test_container_keys_are_not_written_through_a_planted_symlink(
    inventory: Inventory, node_root: Path, tmp_path: Path
) -> None:
    node = inventory.nodes[0]
    keys = ensure_cluster_keys(inventory)
    remote = node_ssh_dir(inventory)
    victim = tmp_path / "victim"
    link = _plant(node_root, f"{remote}/id_ed25519", victim)
    with connect(inventory, node) as conn:
        write_private_dir(conn.sftp(), remote, node_ssh_files(keys, node))
    assert victim.read_bytes() == SECRET
    assert not link.is_symlink()
    for name, data in node_ssh_files(keys, node).items():
        written = node_root / remote.lstrip("/") / name
        assert written.read_bytes() == data
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE((node_root / remote.lstrip("/")).stat().st_mode) == 0o700


def test_write_file_streams_a_controller_file_with_its_mode(
    inventory: Inventory, node_root: Path, tmp_path: Path
) -> None:
    source = tmp_path / "tarball"
    source.write_bytes(bytes(range(256)) * 1000)  # several SFTP chunks
    victim = tmp_path / "victim"
    _plant(node_root, "/var/lib/x/mofed.tgz", victim)
    with connect(inventory, inventory.nodes[0]) as conn:
        write_file(conn.sftp(), source, "/var/lib/x/mofed.tgz", 0o640)
        write_file(conn.sftp(), b"key", "/var/lib/x/ssh/key", 0o600)  # a missing parent is made 0700
    written = node_root / "var/lib/x/mofed.tgz"
    assert written.read_bytes() == source.read_bytes() and victim.read_bytes() == SECRET
    assert stat.S_IMODE(written.stat().st_mode) == 0o640
    assert stat.S_IMODE((node_root / "var/lib/x/ssh").stat().st_mode) == 0o700
    assert (node_root / "var/lib/x/ssh/key").read_bytes() == b"key"


def test_write_file_makes_every_missing_parent(inventory: Inventory, node_root: Path) -> None:
    """The registry CA's path on an engine that never made /etc/docker/certs.d: two levels missing."""
    (node_root / "etc/docker").mkdir(parents=True)
    dest = "/etc/docker/certs.d/10.0.0.1:5443/ca.crt"
    with connect(inventory, inventory.nodes[0]) as conn:
        write_file(conn.sftp(), b"ca", dest, 0o644)
    assert (node_root / dest.lstrip("/")).read_bytes() == b"ca"
    for made in ("etc/docker/certs.d", "etc/docker/certs.d/10.0.0.1:5443"):
        assert stat.S_IMODE((node_root / made).stat().st_mode) == 0o700
