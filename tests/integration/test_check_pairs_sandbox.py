"""`clusterctl check pairs` on a 4-node sandbox (CPU allreduce over Horovod): the healthy cluster
exits 0 with four OK verdicts; with one node's benchmark container slowed (its sends held to a 30th of
the slowest healthy pair, a node whose link runs at a fraction of its rate), that node is named, and only
it. The same sandbox
carries one 4-node collective whose fabric counters are judged by both floors (every node 90% of G,
the nodes' mean 90% of 2(N-1)/N x G)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.image.build import build_image
from clusterctl.image.distribute import distribute
from clusterctl.image.record import effective_image_ref
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.workloads import get_workload
from tests.helpers.sandbox import Sandbox, on_node, private_sandbox
from tests.helpers.strictjson import strict_loads

pytestmark = [pytest.mark.integration, pytest.mark.beside]

# One run per pair keeps the test's cost to six runs per case (the repeats' median is unit-tested). A node
# is named below 10% of its peers' figures, and those figures are the slower healthy pairs (a node's
# figure is the median of its pairs, one of them with the slowed node). One run per pair on a 2-core
# machine shared with other work swings: a fresh-clone CI run measured healthy pairs from 0.078 to
# 0.43 GB/s (5.5x), and one run 0.12 to 0.75 GB/s (6x) within one check. A fixed hold on the slowed node
# (24 Mbit/s) was not slow enough once the machine was loaded further (a CPU-bound job beside CI): the
# healthy pairs slowed with it, to within 10x of the held node. So the hold is a 30th of the slowest
# pair the same sandbox has just measured healthy: 3x below the naming line at the load of the moment,
# with 3x to spare for the load changing between the two checks.
FAST = ["--repeats", "1", "--timeout", "120", "--tolerance", "0.9", "--json"]
# The slowed node's share of the slowest healthy pair.
SLOWDOWN = 30


@pytest.fixture(scope="module")
def sandbox4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A 4-node sandbox (no Slurm) with the image delivered and the benchmark containers up.

    Delivered by the stream transport: zstd on the controller's threads, once per node, instead of the
    registry's push, whose one gzip of the 1.4 GB image on one core costs more than the four streams
    (this sandbox's registry starts empty)."""
    with private_sandbox(tmp_path_factory, "it4", 4) as sandbox:
        build_image(sandbox.inventory)
        distribute(sandbox.inventory, transport="stream")
        lifecycle.up(sandbox.inventory, effective_image_ref(sandbox.inventory), ready_timeout_s=60)
        try:
            yield sandbox
        finally:
            lifecycle.down(sandbox.inventory)


def _check_pairs(sandbox: Sandbox, runs: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["check", "pairs", "-i", str(sandbox.inventory_path), "--runs-dir", str(runs), *FAST])
    out, err = capsys.readouterr()
    assert out.strip(), f"exit {code}, nothing on stdout; stderr: {err}"
    return code, strict_loads(out)


def test_healthy_then_one_slowed_node_is_named_and_only_it(
    sandbox4: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = sandbox4.inventory
    code, healthy = _check_pairs(sandbox4, tmp_path / "healthy", capsys)
    assert healthy["schema"] == "clusterctl.check-pairs/1"
    assert healthy["search"] == "all" and len(healthy["groups"]) == 6
    assert code == 0, json.dumps(healthy)
    assert [n["verdict"] for n in healthy["nodes"]] == ["ok"] * 4, json.dumps(healthy)
    assert all(g["median_gb_s"] > 0 for g in healthy["groups"]), healthy

    # The third node's benchmark container sends at a 30th of the slowest healthy pair: its engine's host
    # network is the node container's, so a token bucket on the node's fabric interface holds it, however
    # loaded the CPUs are (a CPU quota of 0.2 on the inner container did not slow it on a 2-core machine at
    # load 20-50, where no container gets 0.2 CPUs anyway). With 2 ranks each sends the whole buffer per
    # allreduce, so the held node's bus bandwidth is at most the bucket's rate.
    slowest = min(g["median_gb_s"] for g in healthy["groups"])
    rate_bit_s = max(int(slowest * 1e9 * 8 / SLOWDOWN), 1_000_000)
    burst_bytes = max(rate_bit_s // 8 // 100, 4000)  # at least a timer tick's worth of the rate (HZ 100)
    slowed = inventory.nodes[2]
    device = slowed.fabric.interface
    on_node(sandbox4, slowed.name, "tc", "qdisc", "add", "dev", device, "root", "tbf", "rate",
            f"{rate_bit_s}bit", "burst", str(burst_bytes), "latency", "400ms")  # fmt: skip
    try:
        code, slow = _check_pairs(sandbox4, tmp_path / "slow", capsys)
    finally:
        on_node(sandbox4, slowed.name, "tc", "qdisc", "del", "dev", device, "root")
    verdicts = {n["node"]: n["verdict"] for n in slow["nodes"]}
    said = f"{rate_bit_s} bit/s on {slowed.name}: {json.dumps(slow)}"
    assert code == 1, said
    assert [name for name, v in verdicts.items() if v != "ok"] == [slowed.name], said
    assert slow["links"] == [], said
    mine = next(n for n in slow["nodes"] if n["node"] == slowed.name)
    assert mine["busbw_gb_s"] < mine["reference_gb_s"] / 2, mine


def test_a_4_node_collective_is_judged_by_the_node_and_the_mean_floor(
    sandbox4: Sandbox, tmp_path: Path
) -> None:
    """Gloo's ring over eth0 on 4 nodes: each node moves about 2(N-1)/N x G = 1.5 G each way, over both
    the node's floor (0.9 G) and the mean's (1.35 G); the run is valid."""
    inventory = sandbox4.inventory
    plan = plan_run(inventory, "allreduce", nodes=4)
    [(record, _)] = run_plans(
        run_context(inventory, [plan], launcher="ssh", timeout_s=600, runs_dir=tmp_path)
    )
    volume = get_workload("allreduce").allreduce_volume(plan.options.settings)
    assert volume is not None
    g = volume.bytes
    proof = record.counters
    assert proof is not None and set(proof.nodes) == {n.name for n in inventory.nodes}
    assert proof.floor_bytes_per_node == int(0.9 * g)
    assert proof.mean_floor_bytes_per_node == int(0.9 * (2 * 3 * g // 4))
    carried = {name: min(t.sent, t.received) for name, t in proof.nodes.items()}
    assert all(value >= proof.floor_bytes_per_node for value in carried.values()), carried
    assert sum(carried.values()) / 4 >= proof.mean_floor_bytes_per_node, carried
    assert proof.valid and record.valid, record.findings
