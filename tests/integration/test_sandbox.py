"""The sandbox on a real engine: strict SSH with the generated key, the docker SDK on each node's own
engine, a second `up` that changes nothing, `down` that leaves nothing, clear refusals."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import connect
from clusterctl.sandbox import cluster, nodes
from clusterctl.sandbox.nodeimage import base_image
from clusterctl.sandbox.plan import LABEL
from clusterctl.sandbox.scratch import unique_name
from tests.helpers.sandbox import Sandbox, free_subnet

pytestmark = pytest.mark.integration


@pytest.fixture
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state directory for a test that brings up its own sandbox."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    return tmp_path


def _labelled(name: str) -> dict[str, list[str]]:
    client = docker.from_env()
    selector = {"label": f"{LABEL}={name}"}
    return {
        "containers": [c.name for c in client.containers.list(all=True, filters=selector)],
        "networks": [n.name for n in client.networks.list(filters=selector)],
        "volumes": [v.name for v in client.volumes.list(filters=selector)],
    }


def test_openssh_with_the_generated_key_and_strict_host_keys(sandbox2: Sandbox) -> None:
    for node in sandbox2.inventory.nodes:
        assert node.ssh.identity_file and node.ssh.known_hosts
        result = subprocess.run(
            [
                "ssh",
                "-i", node.ssh.identity_file,
                "-o", "IdentitiesOnly=yes",
                "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={node.ssh.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "ConnectTimeout=10",
                f"root@{node.address}",
                "hostname",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == node.name


def test_fabric_connects_with_verified_host_keys(sandbox2: Sandbox) -> None:
    for node in sandbox2.inventory.nodes:
        conn = connect(sandbox2.inventory, node)
        try:
            assert (
                conn.run("cat /etc/hostname", hide=True, timeout=30, in_stream=False).stdout.strip()
                == node.name
            )
        finally:
            conn.close()


def test_docker_sdk_runs_a_container_on_each_nodes_engine(sandbox2: Sandbox) -> None:
    local = docker.from_env(timeout=300)
    for node in sandbox2.inventory.nodes:
        remote = docker_client(sandbox2.inventory, node)
        # No registry reaches the nodes: the image travels as `docker save | docker load`. A file
        # object, not one bytes value: paramiko's sendall copies the rest of a buffer per packet.
        remote.images.load(io.BytesIO(b"".join(local.images.get(base_image()).save(named=True))))
        out = remote.containers.run(base_image(), ["cat", "/etc/hostname"], network_mode="host", remove=True)
        assert out.decode().strip() == node.name
        remote.close()


def test_up_twice_is_a_no_op_then_reconciles_and_down_leaves_nothing(
    own_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, subnet = unique_name("it3"), free_subnet()
    try:
        assert main(["sandbox", "up", "--nodes", "3", "--name", name, "--subnet", subnet]) == 0
        first = {c: docker.from_env().containers.get(c).id for c in _labelled(name)["containers"]}
        assert len(first) == 3
        capsys.readouterr()
        assert main(["sandbox", "up", "--nodes", "3", "--name", name]) == 0
        assert f"sandbox {name} is up (no change)" in capsys.readouterr().out
        assert {c: docker.from_env().containers.get(c).id for c in _labelled(name)["containers"]} == first
        assert main(["sandbox", "status"]) == 0
        assert main(["sandbox", "up", "--nodes", "2", "--name", name]) == 0
        assert f"removed clusterctl-{name}-node3" in capsys.readouterr().out
        assert sorted(_labelled(name)["volumes"]) == [f"clusterctl-{name}-node{i}-docker" for i in (1, 2)]
    finally:
        assert main(["sandbox", "down"]) == 0
    assert _labelled(name) == {"containers": [], "networks": [], "volumes": []}
    assert list(own_state.rglob("*")) == []
    assert main(["sandbox", "down"]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_foreign_container_with_a_clashing_name_is_refused_before_anything_is_made(
    own_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = unique_name("itclash")
    client = docker.from_env()
    foreign = client.containers.create(base_image(), ["true"], name=f"clusterctl-{name}-node2")
    try:
        assert main(["sandbox", "up", "--nodes", "2", "--name", name, "--subnet", free_subnet()]) == 2
        err = capsys.readouterr().err
        assert f"container clusterctl-{name}-node2 (not made by this sandbox)" in err
        assert "Nothing was created" in err
        assert _labelled(name) == {"containers": [], "networks": [], "volumes": []}
        assert list(own_state.iterdir()) == []
        foreign.reload()
        assert foreign.status == "created"
    finally:
        foreign.remove(force=True)


def test_interrupted_up_removes_what_it_made(own_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique_name("itint")

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(nodes, "wait_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cluster.up(name, 2, free_subnet())
    assert _labelled(name) == {"containers": [], "networks": [], "volumes": []}
    assert list(own_state.rglob("*")) == []
