"""Image tags, the build record, the effective image reference, and a build's read timeout against a
real HTTP server that goes silent (no Docker engine needed)."""

from __future__ import annotations

import contextlib
import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import docker
import pytest

from clusterctl.errors import InputError, StepError
from clusterctl.hosts.docker_remote import API_VERSION
from clusterctl.image.build import _one_local_build, _stream_lines, run_build
from clusterctl.image.record import (
    ImageRecord,
    effective_image_ref,
    image_tag,
    read_image_record,
    record_path,
)
from clusterctl.image.render import write_context
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir


@pytest.fixture
def sandbox_inv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    inv = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    inv.image.wheelhouse = None
    return inv


def test_tag_carries_cluster_profile_and_hash(sandbox_inv) -> None:
    assert image_tag(sandbox_inv, "0123456789abcdef" * 4) == "clusterctl/sandbox:cpu-0123456789ab"


def test_explicit_container_image_wins() -> None:
    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    assert image_tag(inv, "ff" * 32) == "horovod:latest-mlnxofed_gpudirect-tf1.14_cuda10.0"
    assert effective_image_ref(inv) == "horovod:latest-mlnxofed_gpudirect-tf1.14_cuda10.0"


def test_effective_ref_needs_a_build_then_reads_the_record(sandbox_inv) -> None:
    with pytest.raises(InputError, match="clusterctl image build"):
        effective_image_ref(sandbox_inv)
    record = ImageRecord(
        reference="clusterctl/sandbox:cpu-0123456789ab",
        image_id="sha256:" + "a" * 64,
        content_hash="0123456789ab" + "0" * 52,
        builder=None,
        built_at=datetime.now(UTC),
    )
    record_path(sandbox_inv).parent.mkdir(parents=True)
    record_path(sandbox_inv).write_text(record.model_dump_json())
    assert read_image_record(sandbox_inv) == record
    assert effective_image_ref(sandbox_inv) == record.reference


def test_same_inventory_same_hash_and_a_change_moves_it(sandbox_inv, tmp_path: Path) -> None:
    first = write_context(sandbox_inv, tmp_path / "a").content_hash
    assert write_context(sandbox_inv, tmp_path / "b").content_hash == first
    sandbox_inv.container.sshd_port = 50001
    assert write_context(sandbox_inv, tmp_path / "c").content_hash != first


def test_wheels_are_hard_linked_into_the_context(sandbox_inv, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "demo-1.0-py3-none-any.whl").write_bytes(b"wheel")
    sandbox_inv.image.wheelhouse = str(wheels)
    ctx = write_context(sandbox_inv, tmp_path / "ctx")
    linked = ctx.directory / "wheelhouse" / "demo-1.0-py3-none-any.whl"
    assert linked.stat().st_ino == (wheels / "demo-1.0-py3-none-any.whl").stat().st_ino


def test_build_stream_error_carries_the_failing_steps_output_tail() -> None:
    events: list[dict[str, object]] = [
        {"stream": "Step 1/9 : FROM debian\n"},
        {"stream": "Step 2/9 : RUN apt-get install nope\n"},
        {"stream": "E: Unable to locate package nope\n"},
        {"error": "The command returned a non-zero code: 100", "errorDetail": {"message": "..."}},
        {"stream": "never read\n"},
    ]
    seen: list[str] = []
    with pytest.raises(StepError) as exc:
        seen.extend(_stream_lines(iter(events), []))
    message = str(exc.value)
    assert "non-zero code: 100" in message
    assert "E: Unable to locate package nope" in message and "Step 2/9" in message
    assert seen == [
        "Step 1/9 : FROM debian",
        "Step 2/9 : RUN apt-get install nope",
        "E: Unable to locate package nope",
    ]


@contextlib.contextmanager
def _silent_engine(silent_for_s: float) -> Iterator[str]:
    """A real HTTP server that takes one build request, starts a chunked reply, then stays silent."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, body = request.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            line = b'{"stream":"Step 1/2 : FROM x"}'
            conn.sendall(b"%x\r\n%s\r\n" % (len(line), line))
            time.sleep(silent_for_s)
            with contextlib.suppress(OSError):  # the client may have given up and closed already
                conn.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        thread.join(timeout=silent_for_s + 5)
        server.close()


def test_build_that_goes_silent_fails_after_the_read_timeout_not_never(sandbox_inv, tmp_path: Path) -> None:
    ctx = write_context(sandbox_inv, tmp_path / "ctx")
    with _silent_engine(silent_for_s=4) as url:
        # The client's own timeout is long: the build must bound its reads itself.
        client = docker.DockerClient(base_url=url, version=API_VERSION, timeout=600)
        seen: list[str] = []
        start = time.monotonic()
        with pytest.raises(StepError, match="sent nothing for 1 s") as exc:
            run_build(
                client, ctx.directory, "t:1", ctx.content_hash, seen.append, where="x", read_timeout_s=1
            )
        assert time.monotonic() - start < 3.5
        assert seen == ["Step 1/2 : FROM x"] and "Step 1/2 : FROM x" in str(exc.value)
        client.close()


def test_a_second_local_build_of_one_context_waits_for_the_first_and_a_node_build_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two builds of one context at once on one engine would make two images for one tag; the second waits.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first_in, release = threading.Event(), threading.Event()
    told: list[str] = []
    order: list[str] = []

    def first() -> None:
        with _one_local_build("c0ffee", None, lambda line: None):
            first_in.set()
            release.wait(10)
            order.append("first done")

    holder = threading.Thread(target=first)
    holder.start()
    assert first_in.wait(10)
    with _one_local_build("c0ffee", "node1", told.append):  # a node's engine: nothing to wait for
        order.append("node build")
    threading.Timer(0.5, release.set).start()
    with _one_local_build("c0ffee", None, told.append):
        order.append("second")
    holder.join(10)
    assert order == ["node build", "first done", "second"]
    assert len(told) == 1 and "another build of this image context on the local engine is running" in told[0]
    assert "pid" in told[0]
    with _one_local_build("other", None, told.append):  # another context does not wait
        assert len(told) == 1
