"""SIGTERM handled like Ctrl-C by commands that must clean up what they started (``up``, ``image push``),
and a cleanup that a second Ctrl-C cannot cut short.

Python turns SIGINT into ``KeyboardInterrupt`` in the main thread; SIGTERM (``kill``, a CI runner's
timeout, systemd) would end the process at once and skip every ``finally``. And a ``KeyboardInterrupt``
raised inside a ``finally`` stops that cleanup half-way: a sandbox's containers removed, its network left.
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


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while inside (main thread only); raise ``KeyboardInterrupt`` on the way out
    if one came, so that a cleanup runs to its end. The block must be bounded (its own timeouts)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt(f"signal {received[0]}, held until the cleanup ended")
