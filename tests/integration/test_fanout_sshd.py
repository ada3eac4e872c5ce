"""A connection storm against a real sshd (issue 41, item 3): one light node (sshd, no engine), and a
fan-out of 24 connections at once to it, each under its own node name, as every node's connection
meets one sshd behind a ProxyJump gateway. sshd's default MaxStartups (10:30:100) drops some of them
before its banner; ``connect`` tries exactly those again, so every one of the 24 answers. Costs about
15 s (the light node's start, then the storm).
"""

from __future__ import annotations

import docker
import pytest

from clusterctl.hosts import ssh
from tests.helpers.sandbox import private_sandbox

pytestmark = [pytest.mark.integration, pytest.mark.beside]

STORM = 24


def test_drops_past_maxstartups_are_retried_and_every_connection_answers(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with private_sandbox(tmp_path_factory, "it-fanout", 1, light=True) as sandbox:
        inv = sandbox.inventory
        node = inv.nodes[0]
        aliases = [node.model_copy(update={"name": f"alias{i}"}) for i in range(STORM)]
        monkeypatch.setenv(ssh.FANOUT_ENV, str(STORM))
        results = ssh.run_on_nodes(inv, aliases, ["hostname"], timeout_s=60)
        container = docker.from_env(timeout=30).containers.get(f"clusterctl-{sandbox.name}-node1")
        log = container.logs().decode(errors="replace")
    assert "past MaxStartups" in log, "sshd dropped nothing: the storm did not test the retry"
    failed = {name: r.error for name, r in results.items() if r.exit_code != 0}
    assert failed == {}
    assert {r.stdout.strip() for r in results.values()} == {"node1"}
