"""`clusterctl image build --builder NODE` on the 2-node sandbox, real parts only: the build context goes
to node1's engine over SSH, node1 builds, `image push --transport stream` streams node1's image to node2
(`docker save` on node1's engine over SSH, zstd on the controller, `zstd -dc | docker load` on node2).

The stream, not the sandbox's default registry: node1's engine would gzip the 1.4 GB image on its one
CPU for the registry (440 s of this test's 788 s on a loaded 2-core machine, against the build's 288 s),
while the stream compresses on the controller's threads. The registry transport is proven by
test_registry_delivery.py and test_push_interrupt.py; a stream whose source is a node's engine only here.

The nodes cannot pull, so node1 first gets the base image the way a real node would already hold it:
`docker save` on the local engine streamed into node1's engine over the product's SSH docker client.

The test shares the session sandbox with tests that build on the local engine (the ``cluster``
fixture), and the image tag is the same for both builds (it carries the context hash, not the
builder). So it puts everything back as it found it, whatever ran before or runs after: the image
record, the tag on each node (pointing at the image it pointed at before, if any), and the base image
on node1.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from clusterctl.cli import main
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.build import build_dir
from clusterctl.image.distribute import StreamTransport
from clusterctl.image.record import image_tag, read_image_record, record_path
from clusterctl.image.render import write_context
from clusterctl.inventory import Inventory, Node
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.integration

# Holds an image on a node while its usual tag is taken away, so that untagging does not delete it.
_KEEP_REPO = "clusterctl-test/builder-keep"


def _image_id(client: docker.DockerClient, reference: str) -> str | None:
    try:
        return client.images.get(reference).id
    except docker.errors.ImageNotFound:
        return None


@contextlib.contextmanager
def _restored_record(inv: Inventory) -> Iterator[None]:
    """Put the image record back as it was (or absent) on the way out."""
    path = record_path(inv)
    saved = path.read_text() if path.is_file() else None
    try:
        yield
    finally:
        if saved is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(saved)


@contextlib.contextmanager
def _tag_cleared(inv: Inventory, node: Node, tag: str) -> Iterator[None]:
    """``tag`` absent on ``node`` inside; on the way out it points where it pointed before, or is gone."""
    repository, version = tag.rsplit(":", 1)
    keep = f"{_KEEP_REPO}:{node.name}"
    with contextlib.closing(docker_client(inv, node)) as client:
        before = _image_id(client, tag)
        if before is not None:
            client.images.get(before).tag(*keep.split(":"))
            client.images.remove(tag)
    try:
        yield
    finally:
        with contextlib.closing(docker_client(inv, node)) as client:
            made = _image_id(client, tag)
            if before is None:
                if made is not None:
                    client.images.remove(tag)  # its only tag: the test's image goes with its layers
            else:
                client.images.get(keep).tag(repository, version)
                client.images.remove(keep)
                if made not in (None, before):
                    client.images.remove(made)  # untagged now: the test's image goes with its layers


@contextlib.contextmanager
def _base_absent(inv: Inventory, node: Node, base: str) -> Iterator[None]:
    """``base`` absent on ``node`` when entering; on the way out, present only if it was before."""
    with contextlib.closing(docker_client(inv, node)) as client:
        had = _image_id(client, base) is not None
        if had:
            client.images.remove(base)
    try:
        yield
    finally:
        with contextlib.closing(docker_client(inv, node)) as client:
            if had and _image_id(client, base) is None:
                _load_from_local_engine(inv, node, base)
            elif not had and _image_id(client, base) is not None:
                client.images.remove(base)


def _load_from_local_engine(inv: Inventory, node: Node, reference: str) -> None:
    """`docker save` on the local engine streamed into ``node``'s engine (chunks, never one bytes value)."""
    local = docker.from_env(timeout=300)
    with contextlib.closing(docker_client(inv, node, timeout_s=300)) as client:
        StreamTransport(local, reference).deliver(node, client, lambda n: None)
        assert _image_id(client, reference) == local.images.get(reference).id
    local.close()


def _row(output: str, node: str) -> str:
    """The first line of ``node``'s row in the push result table."""
    return next(line for line in output.splitlines() if re.search(rf"\b{node}\b", line))


def test_build_on_a_node_then_push_from_it(
    sandbox2: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(sandbox2.state_dir))
    inv = sandbox2.inventory
    builder, other = inv.nodes[0], inv.nodes[1]
    base = inv.image.base
    assert base is not None
    tag = image_tag(inv, write_context(inv, build_dir(inv)).content_hash)
    cli = ["-i", str(sandbox2.inventory_path)]
    took: dict[str, float] = {}

    with (
        _restored_record(inv),
        _tag_cleared(inv, builder, tag),
        _tag_cleared(inv, other, tag),
        _base_absent(inv, builder, base),
    ):
        # No base image on the builder and no registry: a clear error before any upload, nothing built.
        start = time.monotonic()
        capsys.readouterr()
        assert main(["image", "build", "--builder", builder.name, *cli]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"the base image {base} is not on the builder node {builder.name}" in err, err
        assert f"pull it on {builder.name}" in err and "build on the local engine" in err, err
        took["missing base"] = time.monotonic() - start

        start = time.monotonic()
        _load_from_local_engine(inv, builder, base)
        took["load base"] = time.monotonic() - start

        start = time.monotonic()
        assert main(["image", "build", "--builder", builder.name, *cli]) == 0
        took["build on node"] = time.monotonic() - start
        assert "built in" in capsys.readouterr().out
        record = read_image_record(inv)
        assert record is not None and record.builder == builder.name and record.reference == tag
        with contextlib.closing(docker_client(inv, builder)) as client:
            assert _image_id(client, tag) == record.image_id

        start = time.monotonic()
        assert main(["image", "push", "--transport", "stream", *cli]) == 0
        took["push"] = time.monotonic() - start
        out = capsys.readouterr().out
        assert "skipped" in _row(out, builder.name) and "delivered" in _row(out, other.name), out
        with contextlib.closing(docker_client(inv, other)) as client:
            assert _image_id(client, tag) == record.image_id

        start = time.monotonic()
        assert main(["image", "build", "--builder", builder.name, *cli]) == 0
        took["second build"] = time.monotonic() - start
        assert "already built (same context hash)" in capsys.readouterr().out
        again = read_image_record(inv)
        assert again is not None and again.image_id == record.image_id and again.builder == builder.name

    with capsys.disabled():
        print("\n" + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in took.items()))
