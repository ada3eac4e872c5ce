"""The compressed spool behind the stream transport: the builder's stream is read and compressed once,
however many nodes read it, each reader gets the whole stream from its start at its own pace, and a
failure or a stall of the writer is every reader's bounded error."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import zstandard

from clusterctl.errors import StepError
from clusterctl.image.spool import CompressedSpool


def _payload(n: int) -> list[bytes]:
    """``n`` chunks of 256 KiB, half compressible, half random (as image layers are)."""
    return [(bytes([i % 251]) * (1 << 17)) + os.urandom(1 << 17) for i in range(n)]


def _decompressed(chunks: Iterator[bytes]) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(b"".join(chunks))


def test_many_readers_get_the_whole_stream_from_one_read_of_the_source() -> None:
    source = _payload(24)
    opened: list[int] = []
    gate = threading.Event()

    def open_source() -> Iterator[bytes]:
        opened.append(1)
        for i, chunk in enumerate(source):
            if i == 8:
                gate.wait(10)  # readers catch up with the writer and must wait for more, not stop
            yield chunk

    spool = CompressedSpool(open_source, "docker save test")
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(lambda: _decompressed(spool.chunks(timeout_s=30))) for _ in range(4)]
            threading.Timer(0.3, gate.set).start()
            results = [f.result(timeout=60) for f in futures]
        late = _decompressed(spool.chunks(timeout_s=30))  # a reader that starts after the end
    finally:
        spool.close()
    assert opened == [1]
    assert all(r == b"".join(source) for r in [*results, late])


def test_a_failing_source_fails_every_reader_with_its_error() -> None:
    def open_source() -> Iterator[bytes]:
        yield b"x" * 1000
        raise OSError("the builder's engine closed the connection")

    spool = CompressedSpool(open_source, "docker save test")
    try:
        for _ in range(2):
            with pytest.raises(StepError, match="docker save test failed: the builder's engine closed"):
                list(spool.chunks(timeout_s=30))
    finally:
        spool.close()


def test_a_silent_source_is_an_error_after_the_timeout_and_close_stops_the_writer() -> None:
    release = threading.Event()
    finished: list[bool] = []

    def open_source() -> Iterator[bytes]:
        yield b"y" * 1000
        release.wait(30)
        yield b"z" * 1000
        yield b"w" * 1000
        finished.append(True)

    spool = CompressedSpool(open_source, "docker save test")
    with pytest.raises(StepError, match=r"produced nothing new for 0\.5 s"):
        list(spool.chunks(timeout_s=0.5))
    release.set()
    spool.close()  # the writer stops at its next chunk, and close waits for it
    assert finished == []
    assert not any(t.name == "image-spool" and t.is_alive() for t in threading.enumerate())
    with pytest.raises(StepError, match="docker save test: the delivery was closed"):
        list(spool.chunks(timeout_s=5))
