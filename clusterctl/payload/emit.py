"""The payload's marker lines (``CLUSTERCTL_RESULT``, ``CLUSTERCTL_BREAKDOWN``, ``clusterctl-peak``,
``CLUSTERCTL_LOADER``, ``CLUSTERCTL_TRACE``) written whole: one ``write`` of the line and its newline.

Shipped beside ``resnet50_bench.py`` and imported by its siblings; the standard library only, never
clusterctl. ``print`` goes through Python's text and byte buffers, which may hand a long line to the
pipe in more than one ``write``; mpirun (``--tag-output``) forwards what each read of the pipe returns
as a piece after the rank's tag, so a line written in parts can reach the log cut, with another rank's
piece in between. One ``write`` of at most ``PIPE_BUF`` (4096 bytes on Linux) bytes reaches the pipe
whole; longer lines (trace parts are kept below it) are still one call. clusterctl's reader
(``clusterctl.diagnostics.model.marker_values``) also joins cut lines back, per rank.
"""

from __future__ import annotations

import os
import sys


def emit_line(line: str) -> None:
    """Write ``line`` and its newline to stdout in one ``write``, after whatever ``print`` buffered
    before it (so the order stays), and flushed: nothing of it waits in a buffer at exit."""
    sys.stdout.flush()
    data = memoryview((line + "\n").encode("utf-8", "backslashreplace"))
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # stdout replaced by an object without a descriptor
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return
    while data:  # a pipe takes it all in one call; a short write (a signal) sends the rest
        written = os.write(fd, data)
        data = data[written:]
