"""SIGINT during `clusterctl image push` (issue 15, part 2): cleanup happens, partial uploads are removed.

The session sandbox's default transport, the registry. The image is on the builder and (from the
``cluster`` fixture) in the registry and on both nodes. To make the push upload for a few seconds and
stay cheap to redo, the test takes one layer of some 50-130 MB out of the registry's storage, and
removes the image's tag on node2 (its layers stay there under a tag of the test's own, so the pull after
the push is quick). `image push` then starts the registry and uploads that layer; once its upload holds
bytes under ``_uploads/``, the test sends SIGINT to the installed entry point and checks: exit 130 within
a bound, a message naming what was interrupted, no registry process, no temporary registry tag on the
builder, no engine connection left open on any node and no half-pulled blob there, no ``_uploads``
entry in the registry's storage (what "partial uploads are removed" means here: Distribution never
resumes an upload, so after an interrupted push nothing half-uploaded remains, while the blobs that
were whole stay), node2 still without the image; and a second push that delivers and verifies.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.build import read_record
from clusterctl.image.registry import registry_files
from clusterctl.inventory import Inventory
from tests.integration.conftest import Sandbox

pytestmark = [pytest.mark.integration, pytest.mark.faults]

CLUSTERCTL = Path(sys.executable).with_name("clusterctl")  # the installed entry point


def _on_node(sandbox: Sandbox, node: str, *argv: str) -> str:
    """Run ``argv`` in the node container (the node's console); its stdout."""
    done = subprocess.run(
        ["docker", "exec", f"clusterctl-{sandbox.name}-{node}", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _left_on_node(sandbox: Sandbox, node: str) -> list[str]:
    """What a stopped delivery must not leave on ``node``: engine connections (``docker system
    dial-stdio``, one per HTTP connection of clusterctl's client) and half-pulled blobs."""
    processes = _on_node(sandbox, node, "ps", "-eo", "args=").splitlines()
    blobs = _on_node(sandbox, node, "sh", "-c", "ls /var/lib/docker/tmp 2>/dev/null || true").split()
    return [p for p in processes if "dial-stdio" in p] + [b for b in blobs if b.startswith("GetImageBlob")]


def _wait_until(condition, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.2)


def test_sigint_during_image_push_stops_everything_and_the_next_push_delivers(
    cluster: Inventory, sandbox2: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    record = read_record(cluster)
    files = registry_files(cluster)
    repository, _tag = record.reference.rsplit(":", 1)
    v2 = files.storage / "docker" / "registry" / "v2"
    repo = v2 / "repositories" / repository
    blob = {
        d.name: v2 / "blobs" / "sha256" / d.name[:2] / d.name for d in (repo / "_layers/sha256").iterdir()
    }
    sizes = {digest: (path / "data").stat().st_size for digest, path in blob.items()}
    # Big enough to upload for seconds, small enough to upload again at once.
    victim = min((d for d in sizes if sizes[d] > 16 << 20), key=sizes.__getitem__)
    shutil.rmtree(repo / "_layers" / "sha256" / victim)
    shutil.rmtree(blob[victim])
    keep = f"clusterctl-test/keep-{uuid.uuid4().hex[:8]}:x"
    _on_node(sandbox2, "node2", "docker", "tag", record.reference, keep)
    _on_node(sandbox2, "node2", "docker", "rmi", record.reference)
    try:
        proc = subprocess.Popen(
            [str(CLUSTERCTL), "image", "push", "-i", str(sandbox2.inventory_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            def uploading() -> bool:
                assert proc.poll() is None, proc.communicate()
                return sum(f.stat().st_size for f in repo.glob("_uploads/*/data")) >= 1 << 20

            _wait_until(uploading, "an upload into the registry", 120)
            proc.send_signal(signal.SIGINT)
            start = time.monotonic()
            out, err = proc.communicate(timeout=90)
            took = time.monotonic() - start
        finally:
            proc.kill()
        assert proc.returncode == 130, (out, err)
        assert took < 45, f"image push took {took:.0f} s to stop"
        assert "Traceback" not in err
        said = " ".join(err.split())
        assert "image push interrupted: the push to the registry and every pull were stopped" in said, err
        assert "Fix: run `clusterctl image push` again." in said

        registries = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
        assert str(files.config) not in registries, "the registry still runs"
        endpoint = cluster.delivery.registry.endpoint
        local = docker.from_env(timeout=60)
        with contextlib.closing(local):
            tags = [t for image in local.images.list() for t in image.tags]
        assert not [t for t in tags if t.startswith(f"{endpoint}/")], "a registry tag is left on the builder"
        for node in cluster.nodes:
            _wait_until(lambda n=node.name: not _left_on_node(sandbox2, n), f"{node.name} left alone", 20)
        assert list(repo.glob("_uploads/*")) == [], "an unfinished upload stayed in the registry"
        assert not blob[victim].exists()  # it was interrupted, not finished behind our back
        node2 = docker_client(cluster, cluster.node("node2"))
        with contextlib.closing(node2), pytest.raises(docker.errors.ImageNotFound):
            node2.images.get(record.reference)

        capsys.readouterr()
        assert main(["image", "push", "-i", str(sandbox2.inventory_path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["image_id"] == record.image_id
        assert report["nodes"]["node2"]["status"] == "delivered"
        assert {n["image_id"] for n in report["nodes"].values()} == {record.image_id}  # verified on each
        assert (blob[victim] / "data").stat().st_size == sizes[victim]
        assert list(repo.glob("_uploads/*")) == []
    finally:
        _on_node(sandbox2, "node2", "docker", "rmi", keep)
