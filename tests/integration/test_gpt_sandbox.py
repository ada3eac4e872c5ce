"""The gpt workload on the real 2-node sandbox: a tiny model sharded with FSDP across both nodes, valid,
its tokens/s and MFU recorded, and eth0's counters judged against FSDP's volume (not DDP's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.containers import lifecycle
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from clusterctl.results.counters import expected_bytes_per_node
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.run.runner import run_plans
from clusterctl.workloads.gpt_arith import GptShape

pytestmark = pytest.mark.integration

STEPS = 3  # 1 warm-up + 2 measured: the loss must still fall
# Gloo carries FSDP's reduce-scatter with an allreduce's bytes (measured on torch 2.13: see docs), so a
# node moves up to (N-1)/N x (gathered + 2 x 4P) a step; headers and start-up add a little.
MOST = 1.3


def test_fsdp_across_two_nodes_is_proven_by_counters(cluster: Inventory, tmp_path: Path) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    settings: dict[str, Any] = {
        "model_size": "tiny",
        "seq_len": 32,
        "batch_size": 2,
        "warmup_steps": 1,
        "steps": STEPS - 1,
    }
    plan = plan_run(cluster, "gpt", nodes=2, framework="fsdp", **settings)
    [(record, _)] = run_plans(run_context(cluster, [plan], launcher="ssh", timeout_s=600, runs_dir=tmp_path))

    assert record.valid, [f.message for f in record.findings]
    assert record.metrics["total_tokens_per_sec"].value > 0
    assert record.flops is not None and record.flops.mfu is not None
    shape = GptShape.named("tiny", 32)
    proof = record.counters
    assert proof is not None and proof.fabric == "eth0"
    expected = expected_bytes_per_node(shape.fsdp_equivalent_bytes("fp32") * STEPS, 2)
    assert proof.expected_bytes_per_node == expected != expected_bytes_per_node(shape.ddp_bytes() * STEPS, 2)
    on_gloo = (shape.fsdp_gathered_bytes("fp32") + 2 * shape.ddp_bytes()) * STEPS // 2
    for name, node in proof.nodes.items():
        assert node.error is None, name
        assert expected <= node.sent <= MOST * on_gloo, (name, node.sent, expected, on_gloo)
        assert expected <= node.received <= MOST * on_gloo, (name, node.received, expected, on_gloo)
