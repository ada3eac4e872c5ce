"""The test session's guard (tests/session_guard.py) and the orphan records behind it
(clusterctl.sandbox.orphans): a test command stopped by SIGTERM, alone or under pytest-xdist, still
tears its session fixtures down (the sandboxes live there); a record whose owner died is swept, one whose
owner runs is kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterctl.sandbox import orphans

TESTS = Path(__file__).resolve().parent

# A session whose one test says it started, then waits to be stopped; its session fixture's teardown
# leaves a file behind.
SLOW_SESSION = """
import pathlib, time, pytest
from clusterctl.sandbox import orphans

@pytest.fixture(scope="session")
def held():
    with orphans.owned("held-000000"):  # as a scratch sandbox records its owner while it is up
        yield
        time.sleep({teardown_s})  # as long as a sandbox's removal may take
        pathlib.Path({torn!r}).write_text("torn down")

def test_waits(held):
    pathlib.Path({started!r}).write_text("started")
    time.sleep(120)
"""


def _as_at_a_terminal() -> None:
    """In the child before it runs: Ctrl-C's default action (a background shell ignores SIGINT), and a
    process group of its own, as a terminal's foreground job has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setpgid(0, 0)


def _stopped_session(
    tmp_path: Path, sig: signal.Signals, *extra: str, teardown_s: float = 0, group: bool = False
) -> tuple[Path, str]:
    """Start a pytest session (own process group, SIGINT as at a terminal), stop it with ``sig`` once its
    test runs (sent to the whole group, as a terminal's Ctrl-C is, with ``group``); the teardown's file
    and the session's output."""
    torn, started = tmp_path / "torn", tmp_path / "started"
    code = SLOW_SESSION.format(torn=str(torn), started=str(started), teardown_s=teardown_s)
    (tmp_path / "test_slow.py").write_text(code)
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS.parent),
        orphans.RECORDS_ENV: str(tmp_path / "records"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.session_guard", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, *extra, str(tmp_path / "test_slow.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_as_at_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.1)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    output = proc.communicate(timeout=60)[0]
    return torn, output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_session_runs_its_teardown(tmp_path: Path, sig: signal.Signals) -> None:
    torn, output = _stopped_session(tmp_path, sig)
    assert torn.read_text() == "torn down", output
    assert "KeyboardInterrupt" in output


@pytest.mark.parametrize(("sig", "group"), [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_a_stopped_xdist_session_tears_down_in_its_workers(
    tmp_path: Path, sig: signal.Signals, group: bool
) -> None:
    # A teardown longer than the 10 s after which xdist's own shutdown kills an interrupted worker.
    torn, output = _stopped_session(tmp_path, sig, "-n", "2", teardown_s=12, group=group)
    assert torn.read_text() == "torn down", output


def test_a_record_whose_owner_died_is_swept_and_a_live_one_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(orphans.RECORDS_ENV, str(tmp_path))
    with orphans.owned("alive-000001"):
        dead = subprocess.Popen(["true"])
        dead.wait()
        (tmp_path / "dead-000002").write_text(f"{dead.pid} {orphans.process_start(os.getpid())}\n")
        # The live process's ID with another start time: a reused ID is not the owner.
        (tmp_path / "reused-000003").write_text(f"{os.getpid()} 1\n")
        (tmp_path / "garbage-000004").write_text("not a record")
        removed: list[str] = []
        assert orphans.sweep(removed.append) == ["dead-000002", "garbage-000004", "reused-000003"]
        assert removed == ["dead-000002", "garbage-000004", "reused-000003"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["alive-000001"]
    assert list(tmp_path.iterdir()) == []


def test_a_failed_removal_keeps_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(orphans.RECORDS_ENV, str(tmp_path))
    (tmp_path / "dead-000005").write_text("1 1\n")  # PID 1 started at boot, not at tick 1

    def fail(name: str) -> None:
        raise RuntimeError(f"engine gone while removing {name}")

    with pytest.raises(RuntimeError, match="dead-000005"):
        orphans.sweep(fail)
    assert (tmp_path / "dead-000005").is_file()
