"""Reading a local file a user names, with a bound: only a regular file, and never more than a limit.

``inventory validate`` and ``inspect`` read paths given on the command line; ``/dev/zero`` was read
until memory ran out and a FIFO blocked forever.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from clusterctl.errors import InputError


def read_capped(path: Path, max_bytes: int, fix: str) -> bytes:
    """The bytes of the regular file at ``path``, refusing anything else and anything over ``max_bytes``.

    The file is opened without blocking (a FIFO does not hang) and checked with ``fstat`` on the open
    descriptor before a byte is read; at most ``max_bytes + 1`` bytes are ever read.

    Raises:
        InputError: missing, unreadable, not a regular file (device, FIFO, directory) or too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file. Fix: {fix}.") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise InputError(f"{path!s:.200}...: file name too long. Fix: {fix}.") from None
        raise InputError(f"{path}: cannot be read ({exc.strerror}). Fix: {fix}.") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
            raise InputError(f"{path}: is {what}, not a regular file. Fix: {fix}.")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}). Fix: {fix}.") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputError(
            f"{path}: larger than the limit of {max_bytes} bytes. Fix: {fix} (a file this large is not one "
            "clusterctl wrote or reads)."
        )
    return data
