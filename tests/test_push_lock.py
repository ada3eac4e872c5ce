"""One image push per cluster: the second waits for the first, names it, and gives up after its bound."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from clusterctl.errors import StepError
from clusterctl.image.push_lock import LOCK_NAME, push_lock


def test_a_second_push_waits_for_the_first_and_is_told_who_holds_the_lock(tmp_path: Path) -> None:
    order: list[str] = []
    waiting = threading.Event()
    first_holds = threading.Event()
    release_first = threading.Event()

    def first() -> None:
        with push_lock(tmp_path, wait_s=10):
            first_holds.set()
            order.append("first in")
            release_first.wait(10)
            order.append("first out")

    def told(message: str) -> None:
        order.append(f"told: {message}")
        waiting.set()

    holder = threading.Thread(target=first)
    holder.start()
    assert first_holds.wait(10)
    second = threading.Thread(target=lambda: _second(tmp_path, told, order))
    second.start()
    assert waiting.wait(10)  # the second is waiting, not running beside the first
    assert order[-1].startswith("told: ") and f"pid {os.getpid()}" in order[-1]
    release_first.set()
    holder.join(10)
    second.join(10)
    assert [o.split(":")[0] for o in order] == ["first in", "told", "first out", "second in"]


def _second(cluster_dir: Path, told: Callable[[str], None], order: list[str]) -> None:
    with push_lock(cluster_dir, wait_s=10, on_wait=told):
        order.append("second in")


def test_a_push_that_waits_past_its_bound_fails_naming_the_holder(tmp_path: Path) -> None:
    # The holder is another process, as a second `clusterctl image push` would see it.
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from clusterctl.image.push_lock import push_lock
        with push_lock(Path({str(tmp_path)!r}), wait_s=5):
            print("held", flush=True)
            sys.stdin.readline()
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StepError) as failed, push_lock(tmp_path, wait_s=0.5):
            pytest.fail("the lock was taken while another process held it")
        message = str(failed.value)
        assert f"pid {holder.pid}" in message and "after 0.5 s" in message
        assert str(tmp_path / LOCK_NAME) in message and "Fix:" in message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    # The holder's exit released the lock: the next push takes it at once.
    with push_lock(tmp_path, wait_s=0):
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    code = f"from pathlib import Path\nfrom clusterctl.image.push_lock import push_lock\nimport os\nwith push_lock(Path({str(tmp_path)!r}), wait_s=5):\n    print('held', flush=True)\n    os.kill(os.getpid(), 9)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "held" and done.returncode == -9
    with push_lock(tmp_path, wait_s=0):  # the kernel dropped the lock with the process
        pass
