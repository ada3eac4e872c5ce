"""Each sandbox node's benchmark container runs on the node's own share of the CPUs, and the payload
uses exactly that share (real sandbox, real inner engines, real mpirun).

The node containers of a sandbox in capabilities mode share the machine's cgroup tree, so a
container their inner engine starts does not inherit the node's cpuset; these tests read what the
benchmark container and the payload's ranks are really allowed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.containers.plan import container_name
from clusterctl.hosts import container_exec
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory, parse_cpu_list
from clusterctl.sandbox import cluster as sandbox_cluster
from clusterctl.sandbox.slurm import CPUS_PER_NODE
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.integration


def _allowed_cpus(inv: Inventory, node_name: str) -> list[int]:
    """The Cpus_allowed_list of a process started in ``node_name``'s benchmark container."""
    lines: list[str] = []
    code = container_exec.exec_in_container(
        inv,
        inv.node(node_name),
        ["grep", "Cpus_allowed_list", "/proc/self/status"],
        container=container_name(inv, inv.node(node_name)),
        env=None,
        timeout_s=60,
        on_line=lines.append,
    )
    assert code == 0, lines
    (line,) = [x for x in lines if x.startswith("Cpus_allowed_list")]
    return parse_cpu_list(line.split(":", 1)[1])


def test_benchmark_containers_are_limited_to_their_nodes_disjoint_equal_shares(cluster: Inventory) -> None:
    node_cpus = {n.name: n.cpus for n in sandbox_cluster.status().nodes}
    shares = {n.name: parse_cpu_list(n.cpuset or "") for n in cluster.nodes}
    # the session's sandbox runs Slurm: its node containers are GPU-shaped (one real CPU per declared
    # core each, the same ones on a 2-CPU machine), and each benchmark container has an equal, disjoint
    # share of them (the engine is local: the same CPUs as here)
    assert {len(parse_cpu_list(cpus)) for cpus in node_cpus.values()} == {CPUS_PER_NODE}, node_cpus
    assert all(set(shares[name]) <= set(parse_cpu_list(node_cpus[name])) for name in shares), (
        node_cpus,
        shares,
    )
    assert len({len(s) for s in shares.values()}) == 1, shares
    if len(os.sched_getaffinity(0)) >= len(cluster.nodes):
        used = [cpu for s in shares.values() for cpu in s]
        assert len(used) == len(set(used)), f"nodes share CPUs: {shares}"

    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    for node in cluster.nodes:
        assert _allowed_cpus(cluster, node.name) == shares[node.name]


def test_a_one_node_run_uses_exactly_its_nodes_share(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    tiny = ["--steps", "1", "--warmup-steps", "0", "--batch-size", "2", "--image-size", "32"]
    code = main(
        [
            "run",
            "resnet50",
            "-i",
            str(sandbox2.inventory_path),
            "--nodes",
            "1",
            *tiny,
            "--runs-dir",
            str(tmp_path),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    line = next(x for x in captured.err.splitlines() if "CLUSTERCTL_RESULT " in x)
    result = json.loads(line.split("CLUSTERCTL_RESULT ", 1)[1])
    # mpirun's ranks are not bound to one core: rank 0's torch uses all of node1's share
    assert result["cpu_threads"] == len(parse_cpu_list(cluster.primary.cpuset or ""))
