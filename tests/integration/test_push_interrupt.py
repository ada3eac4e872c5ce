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
The same for ``--transport stream``, interrupted while node2's engine unpacks the streamed tar: no
half-loaded tar (``docker-import-*``) and no engine connection is left on any node.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.record import read_image_record
from clusterctl.image.registry import registry_files
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import Sandbox, on_node
from tests.helpers.strictjson import strict_loads

pytestmark = [pytest.mark.integration, pytest.mark.faults]

CLUSTERCTL = Path(sys.executable).with_name("clusterctl")  # the installed entry point


def _left_on_node(sandbox: Sandbox, node: str) -> list[str]:
    """What a stopped delivery must not leave on ``node``: engine connections (``docker system
    dial-stdio``, one per HTTP connection of clusterctl's client), half-pulled blobs, half-loaded tars."""
    processes = on_node(sandbox, node, "ps", "-eo", "args=").splitlines()
    temporary = on_node(sandbox, node, "sh", "-c", "ls /var/lib/docker/tmp 2>/dev/null || true").split()
    partial = [t for t in temporary if t.startswith(("GetImageBlob", "docker-import-"))]
    return [p for p in processes if "dial-stdio" in p] + partial


def _wait_until(condition, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.2)


@contextlib.contextmanager
def _node2_lacks_the_image(sandbox: Sandbox, reference: str) -> Iterator[None]:
    """node2 without the cluster's tag, its layers kept under a tag of the test's own (quick to redo)."""
    keep = f"clusterctl-test/keep-{uuid.uuid4().hex[:8]}:x"
    on_node(sandbox, "node2", "docker", "tag", reference, keep)
    on_node(sandbox, "node2", "docker", "rmi", reference)
    try:
        yield
    finally:
        on_node(sandbox, "node2", "docker", "rmi", keep)


def _interrupted_push(sandbox: Sandbox, flags: list[str], moving, what: str) -> str:
    """Start `image push` (installed entry point), SIGINT it once ``moving()``; its stderr, one line.

    Asserts it exits 130 within a bound, without a traceback, saying what was interrupted and the fix.
    """
    proc = subprocess.Popen(
        [str(CLUSTERCTL), "image", "push", "-i", str(sandbox.inventory_path), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def started() -> bool:
            assert proc.poll() is None, proc.communicate()
            return moving()

        _wait_until(started, what, 150)
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
    assert "image push interrupted: " in said and "Fix: run `clusterctl image push` again." in said, err
    return said


def _nothing_left(cluster: Inventory, sandbox: Sandbox, reference: str) -> None:
    """No registry tag on the builder, nothing left on any node, node2 still without the image."""
    endpoint = cluster.registry_endpoint
    local = docker.from_env(timeout=60)
    with contextlib.closing(local):
        tags = [t for image in local.images.list() for t in image.tags]
    assert not [t for t in tags if t.startswith(f"{endpoint}/")], "a registry tag is left on the builder"
    for node in cluster.nodes:
        _wait_until(lambda n=node.name: not _left_on_node(sandbox, n), f"{node.name} left alone", 20)
    node2 = docker_client(cluster, cluster.node("node2"))
    with contextlib.closing(node2), pytest.raises(docker.errors.ImageNotFound):
        node2.images.get(reference)


def _push_verifies_every_node(sandbox: Sandbox, image_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["image", "push", "-i", str(sandbox.inventory_path), "--json"]) == 0
    report = strict_loads(capsys.readouterr().out)
    assert report["image_id"] == image_id
    assert report["nodes"]["node2"]["status"] == "delivered"
    assert {n["image_id"] for n in report["nodes"].values()} == {image_id}  # verified on each


def test_sigint_during_image_push_stops_everything_and_the_next_push_delivers(
    cluster: Inventory, sandbox2: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    record = read_image_record(cluster)
    assert record is not None
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
    with _node2_lacks_the_image(sandbox2, record.reference):
        said = _interrupted_push(
            sandbox2,
            [],
            lambda: sum(f.stat().st_size for f in repo.glob("_uploads/*/data")) >= 1 << 20,
            "an upload into the registry",
        )
        assert "the push to the registry and every pull were stopped, the registry stopped" in said
        registries = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
        assert str(files.config) not in registries, "the registry still runs"
        _nothing_left(cluster, sandbox2, record.reference)
        assert list(repo.glob("_uploads/*")) == [], "an unfinished upload stayed in the registry"
        assert not blob[victim].exists()  # it was interrupted, not finished behind our back

        _push_verifies_every_node(sandbox2, record.image_id, capsys)
        assert (blob[victim] / "data").stat().st_size == sizes[victim]
        assert list(repo.glob("_uploads/*")) == []


def test_sigint_during_a_stream_push_stops_every_load(
    cluster: Inventory, sandbox2: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--transport stream`: SIGINT once node2's engine is unpacking the streamed tar (`docker save`
    on the builder exports the whole image first, some 40 s here). The next push (the default
    transport: quick, the registry holds every layer) delivers and verifies."""
    record = read_image_record(cluster)
    assert record is not None

    def loading() -> bool:
        found = on_node(
            sandbox2, "node2", "sh", "-c", "du -sk /var/lib/docker/tmp/docker-import-* 2>/dev/null || true"
        )
        return sum(int(line.split()[0]) for line in found.splitlines()) >= 1024

    with _node2_lacks_the_image(sandbox2, record.reference):
        said = _interrupted_push(sandbox2, ["--transport", "stream"], loading, "a load on node2")
        assert "every image stream was stopped" in said
        _nothing_left(cluster, sandbox2, record.reference)
        _push_verifies_every_node(sandbox2, record.image_id, capsys)
