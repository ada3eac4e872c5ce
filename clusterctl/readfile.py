"""Reading a local file with a bound: only a regular file, and never more than a limit.

``inventory validate`` and ``inspect`` read paths given on the command line; ``/dev/zero`` was read
until memory ran out and a FIFO blocked forever. `report` and `explain` read what run directories hold
(``result.json``, ``telemetry/*.jsonl``) the same way: a FIFO planted there is never opened to block, a
device or a huge file never read whole. A regular file's read cannot block, so no timeout is needed
past the non-blocking open.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from clusterctl.errors import InputError


class NotAFile(ValueError):
    """A path that is no regular file (device, FIFO, socket, directory), or one over the size limit."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, refusing anything else and anything over ``max_bytes``.

    The file is opened without blocking (a FIFO does not hang) and checked with ``fstat`` on the open
    descriptor before a byte is read; at most ``max_bytes + 1`` bytes are ever read.

    Raises:
        NotAFile: not a regular file, or larger than ``max_bytes`` (the message says which).
        OSError: missing or unreadable.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
            raise NotAFile(f"is {what}, not a regular file")
        if info.st_size > max_bytes:  # refused before a byte is read (a sparse terabyte reads fast, but long)
            raise NotAFile(f"larger than the limit of {max_bytes} bytes")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise NotAFile(f"larger than the limit of {max_bytes} bytes")
    return data


def read_capped(path: Path, max_bytes: int, fix: str) -> bytes:
    """``read_bounded`` for a path a user names: every refusal an InputError naming the path and ``fix``.

    Raises:
        InputError: missing, unreadable, not a regular file (device, FIFO, directory) or too large.
    """
    try:
        return read_bounded(path, max_bytes)
    except NotAFile as exc:
        large = " (a file this large is not one clusterctl wrote or reads)" if "limit" in str(exc) else ""
        raise InputError(f"{path}: {exc}. Fix: {fix}{large}.") from None
    except FileNotFoundError:
        raise InputError(f"{path}: no such file. Fix: {fix}.") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise InputError(f"{path!s:.200}...: file name too long. Fix: {fix}.") from None
        raise InputError(f"{path}: cannot be read ({exc.strerror}). Fix: {fix}.") from None
