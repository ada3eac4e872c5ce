"""Proof by counters on the real 2-node sandbox: eth0's byte counters, read over SSH before and after
a ResNet-50 run, show each node moving what the allreduces had to move; the same kind of run judged
against an interface the ranks did not use (the inventory's fabric pointed at ``lo``) is invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.containers import lifecycle
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from clusterctl.results.record import RunRecord
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run

pytestmark = pytest.mark.integration

# Few steps: 5 allreduces of ResNet-50's 102 MB of gradients are 0.5 GB per node, plenty to tell
# a fabric that carried them from one that did not.
SHORT = {"warmup_steps": 1, "steps": 4}
# TCP/IP headers, Horovod's own small allreduces and the start-up broadcast of the weights add to
# the gradients; more than this would mean the expectation is wrong.
MOST = 1.6


def _run(inventory: Inventory, launched_from: Inventory, runs_dir: Path) -> RunRecord:
    """One 2-node run of ``launched_from``'s plan, its counters read on ``inventory``'s fabric."""
    plan = plan_run(launched_from, "resnet50", nodes=2, **SHORT)
    [(record, _)] = run_plans(
        run_context(inventory, [plan], launcher="ssh", timeout_s=600, runs_dir=runs_dir)
    )
    return record


def test_fabric_counters_prove_the_run_and_catch_traffic_elsewhere(
    cluster: Inventory, tmp_path: Path
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)

    record = _run(cluster, cluster, tmp_path)
    assert record.valid, record.findings
    proof = record.counters
    assert proof is not None and proof.fabric == "eth0"
    expected = proof.expected_bytes_per_node
    assert expected == 2 * (2 - 1) * 25_557_032 * 4 * 5 // 2
    assert set(proof.nodes) == {n.name for n in cluster.nodes}
    for name, node in proof.nodes.items():
        assert node.error is None, name
        assert list(node.rails) == ["eth0"]
        assert expected <= node.sent <= MOST * expected, (name, node.sent, expected)
        assert expected <= node.received <= MOST * expected, (name, node.received, expected)

    # The same run, but the inventory says the fabric is lo: its counters saw none of the gradients.
    elsewhere = cluster.model_copy(
        update={
            "nodes": [
                n.model_copy(update={"fabric": n.fabric.model_copy(update={"interface": "lo"})})
                for n in cluster.nodes
            ]
        }
    )
    wrong = _run(elsewhere, cluster, tmp_path)
    assert wrong.exit_code == 0 and wrong.value
    assert not wrong.valid
    assert wrong.counters is not None and not wrong.counters.valid
    assert "fabric-counters-short" in {f.code for f in wrong.findings}
    assert "carried far less" in (wrong.counters.reason or "")
