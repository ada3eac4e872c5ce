"""Uploads on a real sandbox node: a controller file is streamed over SFTP only where the probe fails,
arrives byte for byte with its mode, never writes through a planted symlink; and the shipped mofed step
pushes provision.mofed_tarball_path, installs from it and removes what it unpacked."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import uuid
from pathlib import Path

import docker
import pytest
from ruamel.yaml import YAML

from clusterctl.hosts.ssh import connect
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir
from clusterctl.provision.executor import provision, run_step_on_host
from clusterctl.provision.playbook import Step, load_playbook, render_step, select_steps
from clusterctl.yamlio import load_yaml

pytestmark = pytest.mark.integration

MOFED_VERSION = "4.7-3.2.9.0"
# Stands in for MLNX OFED's installer: records how it was called and what it was unpacked from, then
# installs what the real one leaves behind for the probe and the apply (ofed_info, openibd).
FAKE_INSTALLER = f"""\
#!/bin/sh
set -e
here=$(dirname "$0")
echo "$@" > /var/tmp/clusterctl-fake-mofed.args
stat -c %a /var/lib/clusterctl/mofed.tgz > /var/tmp/clusterctl-fake-mofed.mode
sha256sum /var/lib/clusterctl/mofed.tgz | cut -d' ' -f1 > /var/tmp/clusterctl-fake-mofed.tarball
sha256sum "$here/payload.bin" | cut -d' ' -f1 > /var/tmp/clusterctl-fake-mofed.payload
printf '#!/bin/sh\\necho MLNX_OFED_LINUX-{MOFED_VERSION}:\\n' > /usr/bin/ofed_info
chmod 0755 /usr/bin/ofed_info
mkdir -p /etc/init.d
printf '#!/bin/sh\\nexit 0\\n' > /etc/init.d/openibd
chmod 0755 /etc/init.d/openibd
"""
FAKE_INSTALL_LEFTOVERS = "/usr/bin/ofed_info /etc/init.d/openibd /var/tmp/clusterctl-fake-mofed.*"


def _sh(sandbox, node: str, command: str) -> str:
    """Run ``command`` in the node's container (not over clusterctl's SSH); its stdout, exit 0 asserted."""
    container = docker.from_env().containers.get(f"clusterctl-{sandbox.name}-{node}")
    code, out = container.exec_run(["bash", "-c", command])
    assert code == 0, f"{command}: exit {code}: {out.decode(errors='replace')}"
    return out.decode().strip()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def test_a_controller_file_is_streamed_once_with_its_mode(sandbox2, tmp_path: Path) -> None:
    inv = sandbox2.inventory
    node = inv.node("node1")
    tag = uuid.uuid4().hex[:8]
    dest = f"/tmp/clusterctl-upload-{tag}.bin"
    marker = f"/var/tmp/clusterctl-upload-{tag}.ok"
    victim = f"/root/clusterctl-upload-{tag}.victim"
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(5 * 1024 * 1024 + 12345))  # a few MB, not a whole number of chunks
    digest = _sha256(blob)
    step = Step.model_validate(
        {
            "name": "push-blob",
            "description": "a controller file pushed by path",
            "upload": [{"source": "blob", "dest": dest, "mode": 0o640}],
            "check": f"test -f {marker}",
            "apply": f"printf '%s  %s\\n' {digest} {dest} | sha256sum -c - && touch {marker}",
        }
    )
    rendered = render_step(step, node, {})
    # Someone planted a symlink at the destination: the upload must replace it, not write through it.
    _sh(sandbox2, "node1", f"printf original > {victim} && ln -s {victim} {dest}")
    conn = connect(inv, node)
    try:
        dry = run_step_on_host(conn, node, rendered, {"blob": blob}, dry_run=True)
        assert dry.status == "would-change"
        assert _sh(sandbox2, "node1", f"test -L {dest} && echo still-the-symlink") == "still-the-symlink"

        first = run_step_on_host(conn, node, rendered, {"blob": blob}, dry_run=False)
        assert first.status == "changed", first.reason
        assert _sh(sandbox2, "node1", f"sha256sum {dest}").split()[0] == digest
        assert _sh(sandbox2, "node1", f"stat -c '%a %U %F' {dest}") == "640 root regular file"
        assert _sh(sandbox2, "node1", f"cat {victim}") == "original"
        inode = _sh(sandbox2, "node1", f"stat -c %i {dest}")

        # The probe passes now: a second run uploads nothing, even though the local file changed.
        blob.write_bytes(b"changed on the controller")
        second = run_step_on_host(conn, node, rendered, {"blob": blob}, dry_run=False)
        assert second.status == "ok", second.reason
        assert _sh(sandbox2, "node1", f"sha256sum {dest}").split()[0] == digest
        assert _sh(sandbox2, "node1", f"stat -c %i {dest}") == inode
    finally:
        conn.close()
        _sh(sandbox2, "node1", f"rm -f {dest} {marker} {victim}")


def test_an_upload_creates_its_missing_parent_directory(sandbox2) -> None:
    """cluster-ssh uploads into /root/.ssh before its apply runs; a host without that directory must work."""
    inv = sandbox2.inventory
    node = inv.node("node2")
    parent = f"/root/clusterctl-upload-dir-{uuid.uuid4().hex[:8]}"
    step = Step.model_validate(
        {
            "name": "push-key",
            "description": "a small file into a directory that does not exist yet",
            "upload": [{"source": "key", "dest": f"{parent}/key", "mode": 0o600}],
            "check": f"test -f {parent}/key",
            "apply": "true",
        }
    )
    conn = connect(inv, node)
    try:
        outcome = run_step_on_host(conn, node, render_step(step, node, {}), {"key": b"secret"}, dry_run=False)
        assert outcome.status == "changed", outcome.reason
        assert _sh(sandbox2, "node2", f"stat -c '%a %F' {parent}") == "700 directory"
        assert _sh(sandbox2, "node2", f"cat {parent}/key") == "secret"
    finally:
        conn.close()
        _sh(sandbox2, "node2", f"rm -rf {parent}")


def _fake_mofed_tarball(path: Path) -> str:
    """A gzip tarball shaped like MLNX OFED's (one top directory holding mlnxofedinstall); the payload's sha256."""
    payload = os.urandom(2 * 1024 * 1024)
    top = f"MLNX_OFED_LINUX-{MOFED_VERSION}-fake-x86_64"
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode in (
            ("mlnxofedinstall", FAKE_INSTALLER.encode(), 0o755),
            ("payload.bin", payload, 0o644),
        ):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(payload).hexdigest()


def _rdma_inventory_pushing(sandbox, tmp_path: Path, tarball_name: str) -> Path:
    """The sandbox's inventory, made RoCE with a MOFED version and a relative provision.mofed_tarball_path."""
    document = load_yaml(sandbox.inventory_path)
    document["cluster"]["defaults"]["fabric"]["kind"] = "roce"
    document["image"]["versions"] = {"mofed": MOFED_VERSION}
    document["provision"] = {"mofed_tarball_path": tarball_name}
    path = tmp_path / "inventory.yml"
    with path.open("w") as fh:
        YAML(typ="rt").dump(document, fh)
    return path


def test_mofed_step_pushes_the_tarball_installs_from_it_and_cleans_up(sandbox2, tmp_path: Path) -> None:
    tarball = tmp_path / "MLNX_OFED_LINUX-fake.tgz"
    payload_digest = _fake_mofed_tarball(tarball)
    tarball_digest = _sha256(tarball)
    inv = load_inventory(_rdma_inventory_pushing(sandbox2, tmp_path, tarball.name))
    assert inv.provision.mofed_tarball_path == tarball.resolve()
    playbook = load_playbook(data_dir("playbooks") / "host-setup.yml")
    steps = select_steps(playbook, ["mofed"])
    nodes = [inv.node("node1")]
    assert _sh(sandbox2, "node1", "command -v ofed_info || echo none") == "none"
    try:
        first = provision(inv, playbook, steps, nodes)
        assert [(r.node, r.step, r.status) for r in first.results] == [("node1", "mofed", "changed")], first
        assert (
            "--without-fw-update" in _sh(sandbox2, "node1", "cat /var/tmp/clusterctl-fake-mofed.args").split()
        )
        assert _sh(sandbox2, "node1", "cat /var/tmp/clusterctl-fake-mofed.mode") == "600"
        assert _sh(sandbox2, "node1", "cat /var/tmp/clusterctl-fake-mofed.tarball") == tarball_digest
        assert _sh(sandbox2, "node1", "cat /var/tmp/clusterctl-fake-mofed.payload") == payload_digest
        leftovers = "ls -d /var/lib/clusterctl/mofed /var/lib/clusterctl/mofed.tgz 2>/dev/null || true"
        assert _sh(sandbox2, "node1", leftovers) == ""  # the unpacked directory and the tarball are gone

        # An equal version is never reinstalled, and nothing is pushed: the local tarball is not even read.
        tarball.unlink()
        second = provision(inv, playbook, steps, nodes)
        assert [r.status for r in second.results] == ["ok"], second
        assert _sh(sandbox2, "node1", leftovers) == ""
    finally:
        _sh(
            sandbox2,
            "node1",
            f"rm -rf {FAKE_INSTALL_LEFTOVERS} /var/lib/clusterctl/mofed /var/lib/clusterctl/mofed.tgz",
        )
