"""The cluster registry on a node (``delivery.registry.node: node1``), on the 2-node sandbox, real parts
only: provision installs the CA for node1's endpoint on every node, `image push` starts Debian's
docker-registry on node1 over SSH, the controller's engine pushes to it, node2 pulls from it over TLS,
and afterwards no registry process is left on node1 while its blobs stay there for the next push. The
image is a one-file one (the cpu image's 1.4 GB would cost CI minutes and prove nothing more here:
`test_registry_delivery.py` moves the real image through the same transport).
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import uuid
from datetime import UTC, datetime

import docker
import pytest

from clusterctl.errors import EnvironmentProblem
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.image.distribute import distribute
from clusterctl.image.record import ImageRecord, record_path
from clusterctl.image.registry import untrust_on_controller
from clusterctl.image.registry_node import node_paths, running_registry
from clusterctl.inventory import validate_document
from clusterctl.paths import data_dir
from clusterctl.provision.executor import provision
from clusterctl.provision.playbook import load_playbook, select_steps
from clusterctl.yamlio import load_yaml
from tests.helpers.sandbox import Sandbox, remove_from_nodes

pytestmark = pytest.mark.integration

# Prints the registry processes alive on a node (zombies aside: a node's PID 1 reaps them late).
LIVE_REGISTRIES = "ps -eo stat=,comm= | awk '$2 == \"docker-registry\" && $1 !~ /^Z/'"


def _one_file_image(local: docker.DockerClient, repository: str) -> tuple[str, str]:
    """A one-layer image of one file unique to this run (a few hundred bytes to move: the test stays lean,
    and no node can hold its layer already); its reference and ID on the local engine."""
    buf, text = io.BytesIO(), f"{uuid.uuid4()}\n".encode()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("regnode.txt")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    tag = f"regnode-{uuid.uuid4().hex[:8]}"
    local.api.import_image_from_data(buf.getvalue(), repository=repository, tag=tag)
    return f"{repository}:{tag}", local.images.get(f"{repository}:{tag}").id


def test_the_registry_runs_on_node1_for_one_push_and_node2_pulls_from_it(sandbox2: Sandbox) -> None:
    document = load_yaml(sandbox2.inventory_path)
    document["delivery"] = {"transport": "registry", "registry": {"node": "node1"}}
    inv = validate_document(document, sandbox2.inventory_path)
    node1, node2 = inv.nodes
    assert inv.registry_endpoint == f"{node1.address}:5443"

    playbook = load_playbook(data_dir("playbooks") / "host-setup.yml")
    report = provision(inv, playbook, select_steps(playbook, ["registry-server", "registry-ca"]), inv.nodes)
    outcome = {(r.node, r.step): r.status for r in report.results}
    assert not report.failed, report.results
    assert outcome[("node1", "registry-server")] == "ok"  # the node image carries docker-registry
    assert outcome[("node2", "registry-server")] == "skipped"
    assert {outcome[(n.name, "registry-ca")] for n in inv.nodes} == {"changed"}  # a new endpoint

    # The image push delivers is the one the build record names: a small one here, the record restored after.
    local = docker.from_env(timeout=120)
    reference, built = _one_file_image(local, f"clusterctl/{inv.cluster.name}")
    saved = record_path(inv).read_text() if record_path(inv).is_file() else None
    record = ImageRecord(
        reference=reference, image_id=built, content_hash="0" * 64, builder=None, built_at=datetime.now(UTC)
    )
    record_path(inv).write_text(record.model_dump_json())
    try:
        image_id, results = distribute(inv)
        assert image_id == built
        for name in ("node1", "node2"):  # node2 pulls from node1; node1 from its own registry
            assert results[name].status == "delivered", results[name].error
            assert results[name].image_id == built  # verified on the node
            assert results[name].bytes_sent > 0
        with contextlib.closing(docker_client(inv, node2)) as client:
            assert client.images.get(reference).id == built  # under the cluster's own tag
            with pytest.raises(docker.errors.ImageNotFound):  # the registry's name for it was dropped
                client.images.get(f"{inv.registry_endpoint}/{reference}")
    finally:
        untrust_on_controller(inv)
        if saved is None:
            record_path(inv).unlink()
        else:
            record_path(inv).write_text(saved)
        remove_from_nodes(inv, built)
        local.images.remove(reference)
        local.close()

    paths = node_paths(inv)
    probe = (
        f"{LIVE_REGISTRIES}; "
        f"stat -c '%a %n' {paths.directory} {paths.key}; "
        f"test -d {paths.storage}/docker/registry/v2/blobs && echo blobs-kept"
    )
    on_node1 = run_on_nodes(inv, [node1], probe, timeout_s=30)["node1"]
    assert on_node1.ok, on_node1
    lines = on_node1.stdout.splitlines()
    assert lines == [f"700 {paths.directory}", f"600 {paths.key}", "blobs-kept"], lines  # no registry left


def test_a_registry_node_that_cannot_serve_is_named_with_the_fix_and_left_clean(sandbox2: Sandbox) -> None:
    document = load_yaml(sandbox2.inventory_path)
    node1, node2 = sandbox2.inventory.nodes

    document["delivery"] = {"transport": "registry", "registry": {"node": "node2"}}
    on_node2 = validate_document(document, sandbox2.inventory_path)
    hide = "mv /usr/bin/docker-registry /usr/bin/docker-registry.hidden"
    assert run_on_nodes(on_node2, [node2], hide, timeout_s=30)["node2"].ok
    try:
        with (
            pytest.raises(
                EnvironmentProblem, match=r"not installed on node2.*Fix: run `clusterctl provision`"
            ),
            running_registry(on_node2),
        ):
            pass
    finally:
        restore = "mv /usr/bin/docker-registry.hidden /usr/bin/docker-registry"
        assert run_on_nodes(on_node2, [node2], restore, timeout_s=30)["node2"].ok

    # Port 22 is sshd's: the registry starts, fails to listen, and the failure carries its log's words.
    document["delivery"] = {"transport": "registry", "registry": {"node": "node1", "port": 22}}
    busy = validate_document(document, sandbox2.inventory_path)
    with (
        pytest.raises(
            EnvironmentProblem, match=r"(?s)did not answer.*address already in use.*port 22 is free"
        ),
        running_registry(busy),
    ):
        pass
    left = run_on_nodes(busy, [node1], f"{LIVE_REGISTRIES}; ls {node_paths(busy).directory}", timeout_s=30)
    assert left["node1"].ok and "docker-registry" not in left["node1"].stdout, left["node1"]
    assert "registry.pid" not in left["node1"].stdout  # stopped, its record gone
