"""SIGTERM handled like Ctrl-C by commands that must clean up what they started (``up``, ``image push``).

Python turns SIGINT into ``KeyboardInterrupt`` in the main thread; SIGTERM (``kill``, a CI runner's
timeout, systemd) would end the process at once and skip every ``finally``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while inside (main thread only), so cleanup runs for both."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
