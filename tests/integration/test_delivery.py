"""Delivery failure modes on the 2-node sandbox, real engines and sshd, without needing eight nodes.

Eight concurrent 1.66 GB deliveries failed with ``('Connection aborted.', OSError('Socket is closed'))``
and 0 bytes in the table although the image had arrived: a load that takes minutes leaves the node's
other pooled HTTP connection idle until its engine closes it, and the docker SDK's SSH pool handed out
that dead ``dial-stdio`` channel for the check after the load. These tests close the channel (and the
whole SSH session) on the node, the way the engine and a lost peer do, and check the product's client
recovers; and that a node dropping the connection mid-delivery is reported failed with its bytes.
The stream transport's zstd way: compressed where the node has zstd, plain where it does not, in one
push, and nothing left running on the node when the controller side is interrupted.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.distribute import StreamTransport, deliver_all, deliver_to, summary
from clusterctl.inventory import Inventory, Node
from tests.helpers.sandbox import Sandbox, on_node

pytestmark = pytest.mark.integration

# Enough bytes that the load is still streaming when the node drops the connection.
_BLOB_BYTES = 24 << 20


@contextlib.contextmanager
def _one_layer_image(tmp_path: Path, content: bytes) -> Iterator[str]:
    """A one-layer image of ``content`` on the local engine; removed afterwards."""
    blob = tmp_path / "blob"
    blob.write_bytes(content)
    with tarfile.open(tmp_path / "blob.tar", "w") as tar:
        tar.add(blob, arcname="blob")
    reference = f"clusterctl-test/delivery:{uuid.uuid4().hex[:8]}"
    local = docker.from_env(timeout=120)
    with (tmp_path / "blob.tar").open("rb") as data:
        local.api.import_image_from_data(
            data.read(), repository=reference.split(":")[0], tag=reference.split(":")[1]
        )
    try:
        yield reference
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            local.images.remove(reference)
        local.close()


@pytest.fixture
def blob_image(tmp_path: Path) -> Iterator[str]:
    """A one-layer image of one 16-byte pattern repeated (distinct per run; zstd makes it tiny)."""
    with _one_layer_image(tmp_path, uuid.uuid4().bytes * (_BLOB_BYTES // 16)) as reference:
        yield reference


@pytest.fixture
def random_image(tmp_path: Path) -> Iterator[str]:
    """A one-layer image of random bytes (zstd cannot shrink it: the compressed stream flows steadily)."""
    with _one_layer_image(tmp_path, os.urandom(_BLOB_BYTES)) as reference:
        yield reference


class _DroppingTransport:
    """The stream transport, with the node dropping the connection once ``after`` bytes have moved."""

    def __init__(self, inner: StreamTransport, after: int, drop: Callable[[], object]):
        self.inner, self.after, self.moved = inner, after, 0
        self.drop: Callable[[], object] | None = drop  # called once, then None

    def deliver(self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]) -> None:
        def counting(n: int) -> None:
            self.moved += n
            on_bytes(n)
            if self.moved >= self.after and self.drop is not None:
                self.drop()
                self.drop = None

        self.inner.deliver(node, client, counting)


def test_a_node_that_drops_mid_delivery_is_failed_with_its_error_and_bytes(
    sandbox2: Sandbox, blob_image: str
) -> None:
    inv: Inventory = sandbox2.inventory
    node = inv.nodes[1]
    local = docker.from_env(timeout=120)
    image_id = local.images.get(blob_image).id
    transport = _DroppingTransport(
        StreamTransport(local, blob_image),
        after=4 << 20,
        drop=lambda: on_node(sandbox2, node.name, "pkill", "-f", "^sshd: root@", check=False),
    )
    result = deliver_to(inv, node, blob_image, image_id, transport, lambda n: None)
    local.close()
    assert result.status == "failed"
    assert result.error  # the real error, whatever the engine or the channel said
    assert result.bytes_sent >= 4 << 20  # what moved before the drop is reported, not 0
    line = summary({node.name: result})
    assert line.startswith("1 of 1 node(s) failed") and "nothing moved" not in line
    # A second delivery on a fresh client goes through and is verified.
    again = deliver_to(
        inv, node, blob_image, image_id, StreamTransport(docker.from_env(), blob_image), lambda n: None
    )
    assert again.status == "delivered" and again.image_id == image_id
    with contextlib.closing(docker_client(inv, node)) as client:
        client.images.remove(blob_image)


def test_one_stream_push_compresses_where_the_node_has_zstd_and_streams_plain_where_not(
    sandbox2: Sandbox, blob_image: str
) -> None:
    inv = sandbox2.inventory
    with_zstd, without = inv.nodes
    local = docker.from_env(timeout=120)
    image = local.images.get(blob_image)
    on_node(sandbox2, without.name, "mv", "/usr/bin/zstd", "/usr/bin/zstd.hidden", check=True)
    try:
        transport = StreamTransport(local, blob_image, inv)
        results = deliver_all(inv, blob_image, image.id, transport, lambda node, n: None, deadline_s=600)
    finally:
        on_node(sandbox2, without.name, "mv", "/usr/bin/zstd.hidden", "/usr/bin/zstd", check=True)
        for node in inv.nodes:
            on_node(sandbox2, node.name, "docker", "rmi", blob_image, check=False)
        local.close()
    compressed, plain = results[with_zstd.name], results[without.name]
    assert (compressed.status, compressed.image_id, compressed.compression) == ("delivered", image.id, "zstd")
    assert 0 < compressed.bytes_sent < image.attrs["Size"] // 10  # what went over the wire, compressed
    assert (plain.status, plain.image_id, plain.compression) == ("delivered", image.id, "none")
    assert plain.bytes_sent >= image.attrs["Size"]
    assert summary(results) == f"{compressed.bytes_sent + plain.bytes_sent:,} bytes moved"


def test_an_interrupted_compressed_delivery_leaves_nothing_running_on_the_node(
    sandbox2: Sandbox, random_image: str
) -> None:
    inv = sandbox2.inventory
    node = inv.nodes[0]
    pipeline = ("pgrep", "-af", "zstd|docker load")
    running: list[str] = []

    def interrupt(n: int) -> None:  # Ctrl-C on the controller once the first compressed bytes went
        running.append(on_node(sandbox2, node.name, *pipeline, check=False))
        raise KeyboardInterrupt

    local = docker.from_env(timeout=120)
    with contextlib.closing(docker_client(inv, node)) as client, pytest.raises(KeyboardInterrupt):
        StreamTransport(local, random_image, inv).deliver(node, client, interrupt)
    local.close()
    assert "zstd -dc" in running[0] and "docker load" in running[0]  # the node was loading
    left = on_node(sandbox2, node.name, *pipeline, check=False)
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = on_node(sandbox2, node.name, *pipeline, check=False)
    assert left == ""
    assert _blob_missing(sandbox2, node, random_image)


def _blob_missing(sandbox: Sandbox, node: Node, reference: str) -> bool:
    """``reference`` is not on the node's engine (a cut load leaves no image behind)."""
    return on_node(sandbox, node.name, "docker", "images", "-q", reference, check=False).strip() == ""


def test_a_failing_node_pipeline_is_reported_with_what_the_node_said(
    sandbox2: Sandbox, random_image: str
) -> None:
    inv = sandbox2.inventory
    node = inv.nodes[1]
    fake = "#!/bin/sh\necho 'zstd: simulated failure on this node' >&2\nexit 3\n"
    on_node(sandbox2, node.name, "mv", "/usr/bin/zstd", "/usr/bin/zstd.real", check=True)
    try:
        on_node(sandbox2, node.name, "sh", "-c", f"printf %s {shlex.quote(fake)} > /usr/bin/zstd", check=True)
        on_node(sandbox2, node.name, "chmod", "0755", "/usr/bin/zstd", check=True)
        local = docker.from_env(timeout=120)
        image_id = local.images.get(random_image).id
        transport = StreamTransport(local, random_image, inv)
        result = deliver_to(inv, node, random_image, image_id, transport, lambda n: None)
        local.close()
    finally:
        on_node(sandbox2, node.name, "mv", "/usr/bin/zstd.real", "/usr/bin/zstd", check=True)
    assert result.status == "failed"
    assert "zstd -dc | docker load' on node2 exited" in (result.error or "")
    assert "simulated failure on this node" in (result.error or "")
    assert _blob_missing(sandbox2, node, random_image)
