"""The cluster registry on a node (``delivery.registry.node: node1``), on the 2-node sandbox, real parts
only: provision installs the CA for node1's endpoint on every node, `image push` starts Debian's
docker-registry on node1 over SSH, the controller's engine pushes to it, node2 pulls from it over TLS,
and afterwards no registry process is left on node1 while its blobs stay there for the next push.
"""

from __future__ import annotations

import contextlib

import docker
import pytest

from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.playbook import load_playbook, select_steps
from clusterctl.hosts.provision import provision
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.image.build import read_record
from clusterctl.image.distribute import distribute
from clusterctl.image.registry import untrust_on_controller
from clusterctl.image.registry_node import node_paths
from clusterctl.inventory import Inventory, validate_document
from clusterctl.paths import data_dir
from clusterctl.yamlio import load_yaml
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration


def test_the_registry_runs_on_node1_for_one_push_and_node2_pulls_from_it(
    cluster: Inventory, sandbox2: Sandbox
) -> None:
    document = load_yaml(sandbox2.inventory_path)
    document["delivery"] = {"transport": "registry", "registry": {"node": "node1"}}
    inv = validate_document(document, sandbox2.inventory_path)
    node1, node2 = inv.nodes
    assert inv.registry_endpoint == f"{node1.address}:5443"
    record = read_record(inv)

    playbook = load_playbook(data_dir("playbooks") / "host-setup.yml")
    report = provision(inv, playbook, select_steps(playbook, ["registry-server", "registry-ca"]), inv.nodes)
    outcome = {(r.node, r.step): r.status for r in report.results}
    assert not report.failed, report.results
    assert outcome[("node1", "registry-server")] == "ok"  # the node image carries docker-registry
    assert outcome[("node2", "registry-server")] == "skipped"
    assert {outcome[(n.name, "registry-ca")] for n in inv.nodes} == {"changed"}  # a new endpoint

    with contextlib.closing(docker_client(inv, node2)) as client:
        client.images.remove(record.image_id, force=True)  # node2 must fetch it; node1 keeps it
    try:
        image_id, results = distribute(inv)
    finally:
        untrust_on_controller(inv)
    assert image_id == record.image_id
    assert results["node1"].status == "skipped"
    assert results["node2"].status == "delivered", results["node2"].error
    assert results["node2"].image_id == record.image_id  # verified on node2
    assert results["node2"].bytes_sent > 0
    with contextlib.closing(docker_client(inv, node2)) as client:
        assert client.images.get(record.reference).id == record.image_id  # under the cluster's own tag
        with pytest.raises(docker.errors.ImageNotFound):  # the registry's name for it was dropped
            client.images.get(f"{inv.registry_endpoint}/{record.reference}")

    paths = node_paths(inv)
    probe = (
        "ps -eo stat=,comm= | awk '$2 == \"docker-registry\" && $1 !~ /^Z/' ; "
        f"stat -c '%a %n' {paths.directory} {paths.key}; "
        f"test -d {paths.storage}/docker/registry/v2/blobs && echo blobs-kept"
    )
    on_node1 = run_on_nodes(inv, [node1], probe, timeout_s=30)["node1"]
    assert on_node1.ok, on_node1
    lines = on_node1.stdout.splitlines()
    assert lines == [f"700 {paths.directory}", f"600 {paths.key}", "blobs-kept"], lines  # no registry left
