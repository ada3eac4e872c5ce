"""Scratch sandboxes whose owner died: each scratch sandbox leaves a record naming the process that
brought it up, and ``sweep`` removes the sandboxes whose owner is gone.

A test run or bench killed outright (SIGKILL, a lost terminal, a CI job cut at its limit) cannot run its
teardown, so its node containers would run on and hold the machine's cores and memory for every later
run. The record is a small file under ``~/.cache/clusterctl/scratch/`` (not the state directory: tests
point that at a temporary directory of their own), named after the sandbox and holding the owner's
process ID and its start time, so a process ID reused by an unrelated process is not taken for the owner.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

# Where the owner records live; ``CLUSTERCTL_SCRATCH_RECORDS`` moves them (the tests' own sweeps).
RECORDS_ENV = "CLUSTERCTL_SCRATCH_RECORDS"


def records_dir() -> Path:
    """The directory of owner records (``$CLUSTERCTL_SCRATCH_RECORDS``, else ~/.cache/clusterctl/scratch)."""
    configured = os.environ.get(RECORDS_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "clusterctl" / "scratch"


def process_start(pid: int) -> str | None:
    """Process ``pid``'s start time in clock ticks since boot (``/proc/PID/stat`` field 22), or None when
    no such process runs (none, or a zombie: it has exited, its parent has not yet reaped it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses: split after its end.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) <= 19 or fields[0] == "Z":
        return None
    return fields[19]


def owner_alive(record: str) -> bool:
    """Whether the process a record names (``PID START``) still runs; a malformed record names nobody."""
    parts = record.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return False
    return process_start(int(parts[0])) == parts[1]


@contextlib.contextmanager
def owned(name: str) -> Iterator[None]:
    """Record this process as the owner of sandbox ``name`` for the block; the record goes on the way out."""
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"{os.getpid()} {process_start(os.getpid())}\n")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def sweep(remove: Callable[[str], None]) -> list[str]:
    """Call ``remove(name)`` for every recorded sandbox whose owner no longer runs, then drop its record;
    return those names. A removal that raises stops the sweep there, its record kept for the next one."""
    directory = records_dir()
    if not directory.is_dir():
        return []
    swept = []
    for path in sorted(directory.iterdir()):
        try:
            record = path.read_text(errors="replace") if path.is_file() else ""
        except OSError:
            continue
        if not path.is_file() or owner_alive(record):
            continue
        remove(path.name)
        path.unlink(missing_ok=True)
        swept.append(path.name)
    return swept
