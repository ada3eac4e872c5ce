"""SIGTERM or SIGINT (Ctrl-C) during `clusterctl up` leaves nothing running that the up started, on any node."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import docker
import pytest

from clusterctl.cli import main

pytestmark = pytest.mark.integration


def _benchmark_containers(sandbox, node: str, *, running_only: bool) -> list[str]:
    node_container = docker.from_env().containers.get(f"clusterctl-{sandbox.name}-{node}")
    flags = "-q" if running_only else "-aq"
    result = node_container.exec_run(["docker", "ps", flags, "--filter", "label=io.clusterctl.cluster"])
    assert result.exit_code == 0, result.output
    return result.output.decode().split()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_up_removes_what_it_started(sandbox2, signum: signal.Signals) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    assert main(["image", "build", *inv]) == 0
    assert main(["image", "push", *inv]) == 0
    assert main(["down", *inv]) == 0
    secondary = sandbox2.inventory.secondaries[0].name
    for _attempt in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterctl", "up", *inv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not _benchmark_containers(sandbox2, secondary, running_only=True):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "up never started the secondary's container"
                time.sleep(0.1)
            proc.send_signal(signum)
            _out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        if proc.returncode != 0:
            break
        assert main(["down", *inv]) == 0  # up won the race and finished: try again
    else:
        pytest.fail(f"up finished before {signum.name} could reach it, three times")
    assert proc.returncode != 0, err
    for node in sandbox2.inventory.nodes:
        assert _benchmark_containers(sandbox2, node.name, running_only=False) == [], (
            f"{node.name} kept a container"
        )
