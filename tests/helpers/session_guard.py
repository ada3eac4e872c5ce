"""The test session's guard, a pytest plugin (tests/conftest.py loads it).

- SIGTERM and SIGHUP end the session as Ctrl-C does, so every fixture's teardown runs: pytest itself
  dies on SIGTERM, and the session's sandboxes would run on. The first of the three interrupts; any that
  follows (a terminal's Ctrl-C reaching a session that scripts/test.sh also stops) is ignored, so it
  cannot cut the teardown short.
- At the start of a session, the scratch sandboxes a killed session left behind (their owner process is
  gone: ``clusterctl.sandbox.orphans``) are removed, with what went said on the terminal.
"""

from __future__ import annotations

import signal
import tempfile
from types import FrameType

import pytest

from clusterctl.sandbox import orphans

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for sig in STOPS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # SIGINT too, even where it was ignored (a session started in the background of a script): the
    # interrupt tests' children must inherit its default action, not an ignored one.
    for sig in STOPS:
        signal.signal(sig, _interrupt)
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
    lines = [f"removed sandbox {name}, left by a killed test run" for name in swept]
    if failed:
        lines.append(f"could not remove the sandboxes a killed test run left: {failed}")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line)
