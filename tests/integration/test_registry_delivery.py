"""The registry transport on the 2-node sandbox, real parts only: Debian's docker-registry on the
controller with the cluster's CA (installed in each node's /etc/docker/certs.d by `sandbox up`), the
local engine pushing, each node's engine pulling over TLS.

A payload-only rebuild (one file added to the payload) must move only the last, small layers to each
node, and every node must still hold exactly the builder's image ID.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import docker
import pytest

from clusterctl.image import render
from clusterctl.image.build import build_image
from clusterctl.image.distribute import distribute
from clusterctl.image.record import read_image_record, record_path
from clusterctl.inventory import Inventory
from clusterctl.paths import payload_files
from tests.helpers.sandbox import remove_from_nodes

pytestmark = pytest.mark.integration


def test_a_payload_only_rebuild_moves_only_the_small_layers(
    cluster: Inventory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cluster.delivery.transport == "registry"  # the sandbox's default
    record = read_image_record(cluster)
    assert record is not None
    saved_record = record_path(cluster).read_text()
    local = docker.from_env(timeout=120)
    image_bytes = local.images.get(record.image_id).attrs["Size"]

    # One changed line in the payload, nothing else: a new image whose only new layer is the payload's.
    changed = tmp_path / "payload"
    changed.mkdir()
    for script in payload_files():
        shutil.copy2(script, changed / script.name)
    (changed / "changed_marker.py").write_text(f"# rebuilt by {__name__}\n")
    monkeypatch.setattr(render, "payload_files", lambda: sorted(changed.glob("*.py")))
    rebuilt, built = build_image(cluster)
    try:
        assert built and rebuilt.image_id != record.image_id
        image_id, results = distribute(cluster)
        assert image_id == rebuilt.image_id
        for name, result in results.items():
            assert result.status == "delivered", (name, result.error)
            assert result.image_id == rebuilt.image_id  # verified on the node
            assert 0 < result.bytes_sent <= 0.05 * image_bytes, (name, result.bytes_sent, image_bytes)
        # Nothing left to move: the second push skips every node without starting the registry.
        _, again = distribute(cluster)
        assert {r.status for r in again.values()} == {"skipped"}
    finally:
        record_path(cluster).write_text(saved_record)
        remove_from_nodes(cluster, rebuilt.image_id)
        with contextlib.suppress(docker.errors.DockerException):
            # By its tag, never by ID with force: a concurrent session's identical rebuild shares the ID.
            local.images.remove(rebuilt.reference, noprune=True)
        local.close()
