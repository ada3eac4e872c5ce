"""The fan-out every per-node SSH call goes through (``clusterctl.hosts.ssh.fan_out``) at scale (issue 41,
item 3): bounded concurrency, a deadline per node from when its own work starts (a queue of nodes behind
the slots is not cut off at the first wave's deadline), a node that hangs is one result and not a stall,
and the bound is configurable. The drop-and-retry against a real sshd is in
tests/integration/test_fanout_sshd.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clusterctl.errors import InputError
from clusterctl.hosts import ssh
from clusterctl.hosts.command import CommandResult
from clusterctl.inventory import Inventory, Node, load_inventory


def inventory(tmp_path: Path, count: int) -> Inventory:
    path = tmp_path / "inv.yml"
    path.write_text(
        "cluster: {name: c}\nnodes:\n"
        + "".join(
            f"  - {{name: n{i}, address: 10.0.0.{i}, role: {'primary' if i == 1 else 'secondary'}}}\n"
            for i in range(1, count + 1)
        )
    )
    return load_inventory(path)


def test_at_most_the_fanout_run_at_once_and_every_node_gets_its_result(tmp_path: Path) -> None:
    nodes = inventory(tmp_path, 24).nodes
    lock = threading.Lock()
    running, most = 0, 0

    def work(node: Node) -> str:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return node.name

    results = ssh.fan_out(nodes, work, deadline_s=30, parallel=4)
    assert results == {n.name: n.name for n in nodes}
    assert most == 4


def test_each_node_has_its_own_deadline_so_later_waves_are_not_cut_off(tmp_path: Path) -> None:
    # 60 nodes, 2 at a time, 0.05 s each: 1.5 s in all, past a 1 s deadline that each node keeps easily
    nodes = inventory(tmp_path, 60).nodes

    def work(node: Node) -> str:
        time.sleep(0.05)
        return "done"

    results = ssh.fan_out(nodes, work, deadline_s=1.0, parallel=2)
    assert [n for n, r in results.items() if r != "done"] == []


def test_a_node_that_hangs_is_one_result_and_the_others_finish(tmp_path: Path) -> None:
    nodes = inventory(tmp_path, 12).nodes
    release = threading.Event()

    def work(node: Node) -> str:
        if node.name == "n3":
            release.wait(60)
        return "done"

    start = time.monotonic()
    try:
        results = ssh.fan_out(nodes, work, deadline_s=1.0, parallel=4)
    finally:
        release.set()
    assert time.monotonic() - start < 10
    hung = results.pop("n3")
    assert isinstance(hung, CommandResult) and hung.error == "no answer within 1 s"
    assert set(results.values()) == {"done"}


def test_the_fanout_is_configurable_and_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ssh.FANOUT_ENV, raising=False)
    assert ssh.fanout() == ssh.DEFAULT_FANOUT
    monkeypatch.setenv(ssh.FANOUT_ENV, "64")
    assert ssh.fanout() == 64
    monkeypatch.setenv(ssh.FANOUT_ENV, "0")
    with pytest.raises(InputError, match=r"CLUSTERCTL_FANOUT=.0.: .* Fix"):
        ssh.fanout()


def test_a_known_hosts_file_is_parsed_once_per_content_not_once_per_connection(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    key = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    path.write_text(f"10.0.0.1 ssh-ed25519 {key}\n")
    first = ssh.parsed_known_hosts(path)
    assert ssh.parsed_known_hosts(path) is first
    with path.open("a") as fh:
        fh.write(f"10.0.0.2 ssh-ed25519 {key}\n")
    again = ssh.parsed_known_hosts(path)
    assert again is not first and again.lookup("10.0.0.2") is not None
