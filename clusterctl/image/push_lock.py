"""One image push per cluster at a time: a lock file in the cluster's state directory (and the same kind
of lock for one build of a context on the local engine at a time: ``held_lock``).

Two pushes of one cluster would share its registry (one port, one storage directory) and the second's
closing purge of unfinished uploads would remove the first's uploads in progress. ``push_lock`` takes
an exclusive ``flock`` on ``<cluster state>/image-push.lock``: the second push waits for the first,
saying who holds the lock (pid, host, since when), for at most ``wait_s``, then fails naming the holder.
The kernel drops the lock when its holder exits, however it exits, so a killed push never leaves a
stale lock behind; the holder's description in the file is only informative.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.errors import StepError

LOCK_NAME = "image-push.lock"
POLL_S = 0.2


def describe_holder(path: Path) -> str:
    """Who holds the lock at ``path``, as its holder wrote it (or that it does not say)."""
    try:
        holder = json.loads(path.read_text())
        return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is"


@contextlib.contextmanager
def push_lock(
    cluster_dir: Path,
    *,
    wait_s: float,
    on_wait: Callable[[str], None] = lambda message: None,
) -> Iterator[None]:
    """Hold the cluster's image-push lock for the block; wait at most ``wait_s`` for another holder.

    ``on_wait`` is called once, with a sentence naming the holder, when the lock is taken already.

    Raises:
        StepError: the lock was still held after ``wait_s`` (the message names the holder and the fix).
    """
    cluster_dir.mkdir(parents=True, exist_ok=True)
    with held_lock(
        cluster_dir / LOCK_NAME,
        wait_s=wait_s,
        on_wait=on_wait,
        what="image push of this cluster",
        fix="then run `clusterctl image push` again",
    ):
        yield


@contextlib.contextmanager
def held_lock(
    path: Path,
    *,
    wait_s: float,
    on_wait: Callable[[str], None],
    what: str,
    fix: str,
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the block, waiting at most ``wait_s`` for another
    holder; ``what`` names the other holder's work in the messages ("image push of this cluster"), ``fix``
    ends the error's advice ("then run ... again").

    Raises:
        StepError: the lock was still held after ``wait_s``.
    """
    with path.open("a+") as lock:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    on_wait(f"another {what} is running ({describe_holder(path)}); waiting")
                    told = True
                if time.monotonic() >= deadline:
                    raise StepError(
                        f"another {what} still runs after {wait_s:g} s ({describe_holder(path)}; lock "
                        f"{path}). Fix: wait for it to finish, or stop it, {fix}."
                    ) from None
                time.sleep(POLL_S)
        lock.seek(0)
        lock.truncate()
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        lock.write(json.dumps(holder))
        lock.flush()
        try:
            yield
        finally:
            lock.seek(0)
            lock.truncate()
            lock.flush()
            fcntl.flock(lock, fcntl.LOCK_UN)
