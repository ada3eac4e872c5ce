"""One compressed copy of the image stream for every node: the builder's ``docker save`` is read once,
compressed once with zstd and written to a temporary file on the controller, which each node's stream
reads from its start at its own pace, following the writer while it still writes.

Without it, every node cost the builder a whole ``docker save`` (the engine re-reads and re-tars every
layer) and the controller a whole compression: on 4 sandbox nodes, three of the four were repeats. The
file holds the compressed image (about a third of its size; it is unlinked at creation, so it goes
when it is closed, also on a crash) and lives in the controller's temporary directory (``$TMPDIR``).

A failure of the writer (the builder's engine went away, the spool's disk filled) is every reader's
failure, with the writer's error; every wait of a reader is bounded.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import IO

import zstandard

from clusterctl.errors import StepError

# zstd level 1: on the cpu image (1.4 GB tar) with 2 threads, level 1 compresses 365 MB/s to 33%, level 3
# 175 MB/s to 28%, level 6 64 MB/s to 26%; the SSH link carries 23-62 MB/s, and on 2 cores the builder's
# `docker save`, the SSH cipher and the node's load share the CPU, so only level 1 stays ahead of the link.
LEVEL = 1
# Bytes a reader takes from the file at once.
READ_BYTES = 1 << 20
# Seconds the writer may wait, once asked to stop, before the file is closed under it.
STOP_GRACE_S = 10


class CompressedSpool:
    """The zstd-compressed stream of ``open_source()`` (called once, by the writer thread, on the first
    ``chunks`` call), readable from its start by any number of readers at once."""

    def __init__(self, open_source: Callable[[], Iterable[bytes]], what: str) -> None:
        self._open_source = open_source
        self._what = what
        self._file: IO[bytes] | None = None  # created with the writer, on the first ``chunks`` call
        self._changed = threading.Condition()
        self._size = 0
        self._done = False
        self._error: str | None = None
        self._stopping = False
        self._writer: threading.Thread | None = None

    def _write_all(self, fd: int) -> None:
        compressor = zstandard.ZstdCompressor(level=LEVEL, threads=-1).compressobj()
        try:
            for chunk in self._open_source():
                if self._stopping:
                    raise StepError("the delivery was closed")
                self._append(fd, compressor.compress(chunk))
            self._append(fd, compressor.flush())
        except Exception as exc:  # any failure is every reader's, with its message
            with self._changed:
                self._error = str(exc) or type(exc).__name__
                self._changed.notify_all()
            return
        with self._changed:
            self._done = True
            self._changed.notify_all()

    def _append(self, fd: int, data: bytes) -> None:
        if not data:
            return
        os.pwrite(fd, data, self._size)  # only this thread writes; readers stop at _size
        with self._changed:
            self._size += len(data)
            self._changed.notify_all()

    def _ready(self, offset: int) -> bool:
        """Whether a reader at ``offset`` has something to do: bytes past it, the end, or an error."""
        return self._size > offset or self._done or self._error is not None

    def _started(self) -> int:
        """The file's descriptor; the first call creates the file and starts the writer."""
        with self._changed:
            if self._stopping:
                raise StepError(f"{self._what}: the delivery was closed")
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="clusterctl-image-")  # noqa: SIM115 (close())
                self._writer = threading.Thread(
                    target=self._write_all, args=(self._file.fileno(),), name="image-spool", daemon=True
                )
                self._writer.start()
            return self._file.fileno()

    def chunks(self, timeout_s: float) -> Iterator[bytes]:
        """The compressed stream from its start, following the writer until it has written the end.

        Raises:
            StepError: the writer failed (its error), or wrote nothing new for ``timeout_s``.
        """
        fd = self._started()
        offset = 0
        while True:
            with self._changed:
                fresh = self._changed.wait_for(partial(self._ready, offset), timeout_s)
                if self._error is not None:
                    raise StepError(f"{self._what} failed: {self._error}")
                if not fresh:
                    raise StepError(f"{self._what} produced nothing new for {timeout_s:g} s")
                end, done = self._size, self._done
            while offset < end:
                data = os.pread(fd, min(READ_BYTES, end - offset), offset)
                if not data:
                    raise StepError(f"{self._what}: the spool file ended at {offset} of {end} bytes")
                offset += len(data)
                yield data
            if done and offset >= end:
                return

    def close(self) -> None:
        """Stop the writer (at its next chunk; bounded) and remove the file."""
        self._stopping = True
        if self._writer is not None:
            self._writer.join(STOP_GRACE_S)
        if self._file is not None:
            self._file.close()
