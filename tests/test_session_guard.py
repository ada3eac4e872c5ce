"""The test session's guard (tests/session_guard.py) and the orphan records behind it
(clusterctl.sandbox.orphans): a test session stopped by SIGTERM or SIGHUP still tears its session
fixtures down (the sandboxes live there); a record whose owner died (or is a zombie) is swept, one whose
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
        time.sleep(2)  # a removal takes a while: a second signal may come meanwhile
        pathlib.Path({torn!r}).write_text("torn down")

def test_waits(held):
    pathlib.Path({started!r}).write_text("started")
    time.sleep(120)
"""


def _in_the_background() -> None:
    """In the child before it runs: SIGINT ignored, as a script's background job has it (scripts/test.sh
    starts the unit tests so), and a process group of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setpgid(0, 0)


def _stopped_session(tmp_path: Path, *signals: signal.Signals) -> tuple[Path, str]:
    """Start a pytest session (own process group, SIGINT ignored), send it ``signals`` once its test
    runs, a moment apart; the teardown's file and the session's output."""
    torn, started = tmp_path / "torn", tmp_path / "started"
    code = SLOW_SESSION.format(torn=str(torn), started=str(started))
    (tmp_path / "test_slow.py").write_text(code)
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS.parent),
        orphans.RECORDS_ENV: str(tmp_path / "records"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.helpers.session_guard", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_slow.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_in_the_background,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.1)
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.5)
    output = proc.communicate(timeout=60)[0]
    return torn, output


@pytest.mark.parametrize(
    "signals",
    [
        [signal.SIGTERM],
        [signal.SIGHUP],
        [signal.SIGINT],  # though the session started with SIGINT ignored
        [signal.SIGTERM, signal.SIGINT, signal.SIGTERM],  # the later ones land in the teardown
    ],
)
def test_a_stopped_session_runs_its_teardown(tmp_path: Path, signals: list[signal.Signals]) -> None:
    torn, output = _stopped_session(tmp_path, *signals)
    assert torn.read_text() == "torn down", output
    assert "KeyboardInterrupt" in output
    assert list((tmp_path / "records").iterdir()) == []  # the owner's record went with the teardown


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


def test_a_zombie_owner_is_no_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(orphans.RECORDS_ENV, str(tmp_path))
    child = subprocess.Popen(["sleep", "0.5"])
    record = f"{child.pid} {orphans.process_start(child.pid)}"
    assert orphans.owner_alive(record)
    stat = Path(f"/proc/{child.pid}/stat")
    deadline = time.monotonic() + 30
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":  # exited, not yet reaped
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        assert not orphans.owner_alive(record)
    finally:
        child.wait()


def test_a_failed_removal_keeps_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(orphans.RECORDS_ENV, str(tmp_path))
    (tmp_path / "dead-000005").write_text("1 1\n")  # PID 1 started at boot, not at tick 1

    def fail(name: str) -> None:
        raise RuntimeError(f"engine gone while removing {name}")

    with pytest.raises(RuntimeError, match="dead-000005"):
        orphans.sweep(fail)
    assert (tmp_path / "dead-000005").is_file()
