"""`check pairs` without hosts: the search chosen by size, the groups measured, the reference (the
baseline of the hardware, else the cluster's own median), the JSON schema, the verdict lines and the
bad input refused before anything runs. The runs themselves are measured on the 4-node sandbox
(tests/integration/test_check_pairs_sandbox.py); here a simulated cluster answers with one slow node."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from clusterctl.check.pairs import (
    CPU_MAX_BYTES,
    check_pairs,
    collective_workload,
    group_plan,
    pairs_baseline,
    sub_inventory,
)
from clusterctl.cli import main
from clusterctl.cli.pairs import _show
from clusterctl.diagnostics.pairs import halving_groups
from clusterctl.errors import InputError
from clusterctl.inventory import validate_document
from clusterctl.results.baselines import load_baselines
from clusterctl.run.backends.slurm import SlurmBackend
from clusterctl.run.backends.ssh import SshBackend
from clusterctl.run.slurm.script import plan_batch
from clusterctl.workloads.allreduce import Allreduce
from clusterctl.yamlio import load_yaml
from tests.helpers.pairs import ROOT, SANDBOX, Cluster, pairs_inventory
from tests.helpers.slurm import STARTED, slurm_inventory

MODERN = ROOT / "inventories" / "modern-h100.yml"


def test_small_cluster_measures_all_pairs_and_names_the_slow_node() -> None:
    cluster = Cluster(slow="n03")
    report = check_pairs(pairs_inventory(4), cluster)
    assert report.search == "all" and len(cluster.measured) == 6
    assert report.named == ["n03"]
    slow = next(v for v in report.nodes if v.node == "n03")
    assert (slow.busbw, slow.reference, slow.basis) == (0.3, 2.0, "median of its peers")


def test_large_cluster_compares_halves_with_each_other() -> None:
    cluster = Cluster(slow="n11")
    report = check_pairs(pairs_inventory(16), cluster)
    assert report.search == "halving"
    assert cluster.measured[:2] == [
        tuple(f"n{i:02d}" for i in range(1, 9)),
        tuple(f"n{i:02d}" for i in range(9, 17)),
    ]
    assert len(cluster.measured) <= 2 * 4 + 3  # far fewer than the 120 pairs
    assert report.named == ["n11"]
    verdicts = {v.node: v for v in report.nodes}
    assert verdicts["n11"].verdict == "slow" and verdicts["n11"].busbw == 0.3
    assert verdicts["n11"].basis == "the other suspects' pairs"
    assert (verdicts["n02"].verdict, verdicts["n02"].busbw, verdicts["n02"].reference) == ("ok", 2.0, 0.3)
    assert verdicts["n02"].basis == "the other half"


@pytest.mark.parametrize("size", [4, 5, 8, 9, 16, 31, 32, 64, 100, 128])
def test_the_halving_search_measures_log_n_groups(size: int) -> None:
    """Two halves a round and two or three last pairs, so at most 2 ceil(log2 n) + 3 groups wherever the
    slow node sits (issue 41), also where a larger group is slower than a pair (as on the sandbox, whose
    nodes share its cores); a healthy cluster costs one comparison. Every search names the slow node,
    and only it."""
    inventory = pairs_inventory(size)
    names = [n.name for n in inventory.nodes]
    for shrinking in (False, True):
        counts = []
        for slow in names:
            cluster = Cluster(slow=slow, shrinking=shrinking)
            report = check_pairs(inventory, cluster, search="halving")
            assert report.named == [slow], (size, slow, shrinking)
            counts.append(len(cluster.measured))
        assert max(counts) <= halving_groups(size) == 2 * math.ceil(math.log2(size)) + 3, (size, max(counts))
        healthy = Cluster(slow=None, shrinking=shrinking)
        assert check_pairs(inventory, healthy, search="halving").named == []
        assert len(healthy.measured) == 2  # the two halves, level


def test_a_halving_report_reads_at_80_columns_named_node_first_cleared_halves_folded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = check_pairs(pairs_inventory(32), Cluster(slow="n17", shrinking=True), search="halving")
    _show(report)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["n17", "SLOW"]
    assert len(lines) <= 8 and all(len(line) <= 80 for line in lines), lines  # 32 nodes, a few lines
    # the cleared half in one line (n01 ran the last pairs with the suspects: its line is theirs)
    assert any(line.startswith("n[02-16]") and " OK " in line for line in lines), lines


def test_halving_needs_four_nodes_and_says_so_before_any_run() -> None:
    cluster = Cluster(slow=None)
    with pytest.raises(InputError, match=r"needs 4 nodes.*--search all"):
        check_pairs(pairs_inventory(3), cluster, search="halving")
    assert cluster.measured == []


def test_halving_on_a_healthy_cluster_names_nothing() -> None:
    report = check_pairs(pairs_inventory(10), Cluster(slow=None), search="halving")
    assert report.named == [] and {v.verdict for v in report.nodes} == {"ok"}


def test_the_baseline_of_the_hardware_is_the_reference() -> None:
    baselines = load_baselines()
    document = load_yaml(MODERN)  # as 2 x DGX A100 on HDR: the deepops figure
    document["cluster"]["defaults"]["gpus"]["model"] = "A100-SXM4-80GB"
    document["cluster"]["defaults"]["fabric"]["rate_gbps"] = 200
    found = pairs_baseline(validate_document(document, MODERN), baselines)
    assert found is not None and found.name == "nccl-allreduce-2x8xa100-hdr-ib"
    assert (
        pairs_baseline(validate_document(load_yaml(MODERN), MODERN), baselines) is None
    )  # no NDR figure yet
    assert pairs_baseline(pairs_inventory(4), baselines) is None  # CPU nodes: no published figure
    report = check_pairs(pairs_inventory(4), Cluster(slow=None), baseline=found)
    assert {v.verdict for v in report.nodes} == {"slow"}  # 2 GB/s is no A100 pair
    assert report.to_json()["baseline"]["name"] == found.name


def test_json_has_the_schema_version_and_every_group() -> None:
    report = check_pairs(pairs_inventory(3), Cluster(slow=None), search="all").to_json()
    assert report["schema"] == "clusterctl.check-pairs/1"
    # in rounds, each node starting one of its two pairs (its first node starts mpirun)
    assert [g["nodes"] for g in report["groups"]] == [["n02", "n03"], ["n03", "n01"], ["n01", "n02"]]
    assert (
        report["groups"][0]["samples_gb_s"] == [2.0, 0.4, 2.2] and report["groups"][0]["median_gb_s"] == 2.0
    )
    assert {n["verdict"] for n in report["nodes"]} == {"ok"}


def test_a_group_runs_as_its_own_inventory_with_its_first_node_primary() -> None:
    sub = sub_inventory(pairs_inventory(4), ["n03", "n01"])
    assert [n.name for n in sub.nodes] == ["n03", "n01"]
    assert sub.primary.name == "n03" and [n.name for n in sub.secondaries] == ["n01"]


def test_under_slurm_a_group_s_job_is_pinned_to_the_group_s_nodes() -> None:
    inventory = slurm_inventory(partition="debug")
    sub = SlurmBackend().on_exactly(sub_inventory(inventory, ["node2", "node1"]))
    assert sub.slurm is not None and sub.slurm.nodelist == "node[1-2]" and sub.slurm.partition == "debug"
    assert sub.primary.name == "node2"
    group = sub_inventory(inventory, ["node2", "node1"])
    assert SshBackend().on_exactly(group) == group  # over ssh the nodes are where mpirun starts ranks
    plan = group_plan(sub, collective_workload(sub))
    script = plan_batch(sub, plan, STARTED, "abc123").script
    assert "#SBATCH --nodelist=node[1-2]" in script and "#SBATCH --nodes=2" in script


def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "pairs", "-i", str(SANDBOX), "--search", "thirds"]) == 2
    assert "--search 'thirds': use auto, all or halving" in capsys.readouterr().err
    one = tmp_path / "one.yml"
    document = load_yaml(SANDBOX)
    document["nodes"] = document["nodes"][:1]
    one.write_text(json.dumps(document))  # JSON is YAML
    assert main(["check", "pairs", "-i", str(one)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "needs at least 2 nodes" in err and "Fix:" in err
    assert not (tmp_path / "runs").exists()


def test_the_cpu_collective_of_a_pair_measures_only_the_size_it_is_judged_by() -> None:
    inventory = pairs_inventory(2)
    small = collective_workload(inventory)
    assert isinstance(small, Allreduce)
    assert small.argv(inventory.run, gpu=False)[-2:] == ["--min-bytes=4194304", "--max-bytes=4194304"]
    assert small.allreduce_volume(inventory.run).bytes == CPU_MAX_BYTES * 6  # warm-up + 5, one size
    assert Allreduce().argv(inventory.run, gpu=False)[-1] == "--framework=horovod"  # `run`'s own sizes
    assert Allreduce(max_bytes=1 << 22).allreduce_volume(inventory.run).bytes == (1 + 2 + 4) * (1 << 20) * 6
    with pytest.raises(ValueError, match="not one of the payload's sizes"):
        Allreduce(max_bytes=3 << 20)
    with pytest.raises(ValueError, match="above max_bytes"):
        Allreduce(min_bytes=1 << 23, max_bytes=1 << 22)


def test_the_verdict_lines_come_first_within_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runs are the sandbox test's; here the simulated cluster answers for them.
    monkeypatch.setattr("clusterctl.check.pairs.conductor_measure", lambda *a, **k: Cluster(slow="n03"))
    path = tmp_path / "four.yml"
    document = load_yaml(SANDBOX)
    document["nodes"] = [
        {"name": f"n{i:02d}", "address": f"10.213.0.{10 + i}", **({"role": "primary"} if i == 1 else {})}
        for i in range(1, 5)
    ]
    path.write_text(json.dumps(document))
    junit = tmp_path / "pairs.xml"
    assert main(["check", "pairs", "-i", str(path), "--junit", str(junit)]) == 1
    lines = capsys.readouterr().out.splitlines()
    # the named node first; the three healthy ones say the same, so they share one line
    assert [line.split()[:2] for line in lines[:2]] == [["n03", "SLOW"], ["n[01-02,04]", "OK"]]
    assert lines[0].split(None, 2)[2] == "busbw 0.3 GB/s vs 2 GB/s median of its peers"
    assert lines[1].split(None, 2)[2] == "busbw 2 GB/s vs 2 GB/s median of its peers"
    assert all(len(line) <= 80 for line in lines)
    assert "SLOW busbw 0.3 GB/s" in junit.read_text()
