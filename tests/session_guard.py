"""The test session's guard, a pytest plugin (tests/conftest.py loads it).

- SIGTERM and SIGHUP end the session as Ctrl-C does, so every fixture's teardown runs (pytest itself
  dies on SIGTERM, leaving the session's sandboxes running). Under pytest-xdist the controller passes
  the signal on to its workers as SIGINT, since the sandboxes live in the workers.
- At the start of a session, the scratch sandboxes a killed session left behind (their owner process is
  gone) are removed, with what went said on the terminal.
- Every integration test runs on one xdist worker (the ``sandbox`` group): they share the session's
  sandbox, which each worker would otherwise bring up for itself. The unit tests spread over the others.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from pathlib import Path
from types import FrameType

import pytest

from clusterctl.sandbox import orphans

SANDBOX_GROUP = "sandbox"
# Seconds the xdist controller waits, after an interrupt, for its workers' teardown (a 4-node sandbox's
# removal on a loaded 2-core machine) before it ends the session itself.
WORKER_TEARDOWN_S = 300


def _children() -> list[int]:
    """The IDs of this process's child processes (from /proc: the xdist workers, under the controller)."""
    me = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            if text[text.rfind(")") + 2 :].split()[1] == me:
                found.append(int(stat.parent.name))
    return found


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """End the session as Ctrl-C does. Under xdist (this process has workers) pass the interrupt on to
    the workers and wait, bounded, until none of them owns a sandbox any more (their teardown removed
    it): xdist's own shutdown kills an interrupted worker after 10 s, which would cut a removal short."""
    workers = set(_children())
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            if signum != signal.SIGINT:  # a terminal's Ctrl-C reached the workers already
                os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + WORKER_TEARDOWN_S
    while workers & set(orphans.owners().values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    raise KeyboardInterrupt(f"signal {signum}")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _interrupt)
    if getattr(config.option, "numprocesses", None) and not _is_worker(config):
        signal.signal(signal.SIGINT, _interrupt)
    if not _is_worker(config):
        _sweep(config)


def _sweep(config: pytest.Config) -> None:
    """Remove the sandboxes a killed session left (only when there is a record of one: no engine call
    otherwise)."""
    directory = orphans.records_dir()
    if not directory.is_dir() or not any(directory.iterdir()):
        return
    from clusterctl.sandbox.scratch import sweep_orphans

    # A state directory of its own: the removal looks for the sandbox's files there, never the user's.
    with tempfile.TemporaryDirectory() as state, pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLUSTERCTL_STATE_DIR", state)
        try:
            swept = sweep_orphans()
        except Exception as exc:  # no engine, a failed removal: said, and the tests go on
            swept, failed = [], f"{type(exc).__name__}: {exc}"
        else:
            failed = ""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in [f"removed sandbox {name}, left by a killed test run" for name in swept] + (
        [f"could not remove the sandboxes a killed test run left: {failed}"] if failed else []
    ):
        if reporter is not None:
            reporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.xdist_group(SANDBOX_GROUP))
