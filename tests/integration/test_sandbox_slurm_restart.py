"""A sandbox node whose container restarts comes back into Slurm: its entrypoint starts munge and
slurmd again (the controller's slurmctld too, on node1), from the files `sandbox up --slurm` wrote."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from tests.helpers.sandbox import Sandbox, on_node

pytestmark = pytest.mark.integration


def _wait_for(what: str, check: Callable[[], bool], deadline_s: float) -> None:
    """Until ``check()`` is true, at most ``deadline_s`` seconds."""
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {deadline_s:g} s"
        time.sleep(0.5)


def test_a_restarted_node_runs_slurm_jobs_again(sandbox2: Sandbox) -> None:
    container = f"clusterctl-{sandbox2.name}-node2"
    before = on_node(sandbox2, "node2", "pgrep", "-x", "slurmd").split()
    assert before, "the sandbox's node2 runs no slurmd before the restart"
    subprocess.run(["docker", "restart", "-t", "5", container], check=True, capture_output=True, timeout=120)
    # The node's own engine and sshd are back (the other tests use them after this one).
    _wait_for(
        "node2's Docker engine answering",
        lambda: on_node(sandbox2, "node2", "docker", "info", "-f", "{{.ID}}", check=False).strip() != "",
        60,
    )
    after = on_node(sandbox2, "node2", "pgrep", "-x", "slurmd", check=False).split()
    assert after, "no slurmd after the restart (a restart ends every process of the container)"
    assert on_node(sandbox2, "node2", "pgrep", "-x", "munged", check=False).strip()
    # A job placed on node2 runs there, within a bounded wait for the node to take jobs.
    ran = on_node(
        sandbox2, "node1", "timeout", "90", "srun", "-w", "node2", "-N1", "-n1", "--immediate=60", "hostname"
    )
    assert ran.strip() == "node2"
