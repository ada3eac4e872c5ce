"""`check health --level standard|burn-in` without hosts: dcgmi diag and nvbandwidth outputs captured on
real machines (public issues) judged per node, the single-node collectives judged against the baseline
or the other nodes, a check that could not look left unknown, and each tier's bounds stated in --help."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from clusterctl.check.health_collective import COLLECTIVES_FILE, node_ranks, save_collectives
from clusterctl.check.pairs import collective_workload, group_plan, sub_inventory
from clusterctl.cli import main
from clusterctl.cli.check import DEFAULT_TIMEOUT_S
from clusterctl.diagnostics.active import (
    TIERS,
    NodeCollective,
    collective_findings,
    dcgm_findings,
    h2d_findings,
)
from clusterctl.diagnostics.bundle import write_bundle
from clusterctl.diagnostics.collectors import collection_script
from clusterctl.diagnostics.health import health_collectors, judge_health
from clusterctl.diagnostics.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.diagnostics.parsers.nvbandwidth import parse_nvbandwidth
from clusterctl.inventory import load_inventory
from tests.fixtures import fixture_text
from tests.helpers.health import DCGM_PASS, H2D_8GPU, HEALTHY, INVENTORY, active_bundle
from tests.helpers.strictjson import strict_loads

ROOT = Path(__file__).parents[1]
CPU_INVENTORY = ROOT / "inventories" / "sandbox-example.yml"
DCGM_FAIL = "dcgmi_diag/dcgm-issue49-r2-2.4.6-pcie-fail-partial.txt"
DCGM4 = "dcgmi_diag/dcgm-issue253-4.2.3-per-gpu-rows-partial.txt"


def test_dcgm_tables_of_three_versions_read_and_only_the_failed_test_is_an_error() -> None:
    assert parse_dcgmi_diag(fixture_text(DCGM_PASS)).version == "3.3.1"
    assert len(parse_dcgmi_diag(fixture_text(DCGM_PASS)).tests) == 8
    assert dcgm_findings(parse_dcgmi_diag(fixture_text(DCGM_PASS)), "n1") == []
    dcgm4 = parse_dcgmi_diag(fixture_text(DCGM4))
    assert [(t.category, t.name, t.result) for t in dcgm4.tests] == [
        ("Deployment", "software", "Pass"),
        ("Hardware", "memory", "Pass"),
    ]
    assert dcgm4.unparsed_lines == []
    [finding] = dcgm_findings(parse_dcgmi_diag(fixture_text(DCGM_FAIL)), "n1")
    assert (finding.severity, finding.code, finding.node) == ("error", "dcgm-diag-fail", "n1")
    assert finding.message.startswith(
        "DCGM diagnostic Integration/PCIe: Fail - All (GPU 0GPU 0's NvLink link 0"
    )
    assert finding.advice.startswith("Drain the node")


def test_h2d_copy_of_every_gpu_is_reported_and_a_gpu_far_below_its_peers_is_named() -> None:
    bandwidth = parse_nvbandwidth(fixture_text(H2D_8GPU))
    assert bandwidth.testcase == "host_to_device_memcpy_ce" and bandwidth.total == 205.04
    assert bandwidth.gpus[2] == 23.9 and len(bandwidth.gpus) == 8
    [info] = h2d_findings(bandwidth, "n1")  # 23.9-26.4 GB/s: all healthy
    assert info.severity == "info" and "GPU0 25.5" in info.message
    bandwidth.gpus[2] = 6.1  # as if GPU2's link had trained down to x4
    assert [(f.code, f.severity) for f in h2d_findings(bandwidth, "n1")][1:] == [
        ("h2d-bandwidth-low", "warning")
    ]
    assert "GPU2" in h2d_findings(bandwidth, "n1")[1].message


STANDARD = {**HEALTHY, "h2d-bandwidth": H2D_8GPU, "dcgmi-diag": DCGM_PASS}


def test_standard_bundle_fails_the_node_dcgm_failed_and_a_missing_nvbandwidth_is_unknown(
    tmp_path: Path,
) -> None:
    inventory = load_inventory(INVENTORY)
    bundles = {
        "hgx-01": active_bundle("hgx-01", STANDARD, {"dcgmi-diag": "missing"}),  # DCGM is optional
        "hgx-02": active_bundle("hgx-02", {**STANDARD, "dcgmi-diag": DCGM_FAIL}),
    }
    report = judge_health(bundles, inventory, tmp_path, 5, "standard")
    ok, bad = report.nodes["hgx-01"], report.nodes["hgx-02"]
    assert ok.verdict == "ok" and ok.active["h2d-bandwidth"].status == "ok"
    assert ok.active["dcgmi-diag"].status == "unknown" and "missing" in ok.active["dcgmi-diag"].detail
    assert bad.verdict == "fail" and bad.active["dcgmi-diag"].status == "fail"
    assert bad.summary().startswith("dcgm-diag-fail: DCGM diagnostic Integration/PCIe")

    no_tool = judge_health(
        {"hgx-01": active_bundle("hgx-01", STANDARD, {"h2d-bandwidth": "missing"})}, inventory, tmp_path, 5
    )
    assert no_tool.nodes["hgx-01"].verdict == "unknown" and "h2d-bandwidth" in no_tool.nodes["hgx-01"].unknown


def test_gpu_checks_on_a_cpu_node_say_unknown_without_failing_it(tmp_path: Path) -> None:
    inventory = load_inventory(CPU_INVENTORY)
    node = inventory.nodes[0].name
    files = {key: "" for key in STANDARD} | {
        "lspci-vvv": "lspci_vvv/gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
    }
    missing = {key: "missing" for key in ("nvidia-smi-q", "ibstat", "h2d-bandwidth", "dcgmi-diag")}
    report = judge_health({node: active_bundle(node, files, missing)}, inventory, tmp_path, 5, "standard")
    health = report.nodes[node]
    assert (
        health.active["h2d-bandwidth"].status == "unknown"
        and health.active["h2d-bandwidth"].detail == "no GPU on this node"
    )
    assert "h2d-bandwidth" not in health.unknown


def test_collectives_judged_against_the_other_nodes_only_from_three_on() -> None:
    def result(node: str, busbw: float) -> NodeCollective:
        return NodeCollective(node, (busbw,), () if busbw else ("exit code 1",), ("runs/x",))

    two = collective_findings([result("a", 1.0), result("b", 0.1)], None, "")
    assert {f.severity for f in two} == {"info"}  # two nodes cannot be told apart
    three = collective_findings([result("a", 1.0), result("b", 0.1), result("c", 0.9)], None, "")
    assert [(f.node, f.code) for f in three if f.severity != "info"] == [("b", "collective-slow")]
    baseline = collective_findings([result("a", 1.0), result("b", 0.0)], 2.5, "baseline x")
    assert [(f.node, f.code) for f in baseline] == [("a", "collective-slow"), ("b", "collective-failed")]
    unstarted = NodeCollective("a", (), ("no container",), (), started=False)
    assert [f.code for f in collective_findings([unstarted], None, "")] == ["collective-unknown"]


def test_from_a_saved_bundle_the_collectives_are_judged_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_bundle(
        tmp_path, {"hgx-01": active_bundle("hgx-01", STANDARD), "hgx-02": active_bundle("hgx-02", STANDARD)}
    )
    save_collectives(
        tmp_path,
        [
            NodeCollective("hgx-01", (480.0,), (), ("runs/a",)),
            NodeCollective("hgx-02", (), ("container not running",), (), started=False),
            NodeCollective("not-in-inventory", (1.0,), (), ("runs/c",)),  # an edited file: ignored
        ],
    )
    assert json.loads((tmp_path / COLLECTIVES_FILE).read_text())[1]["started"] is False
    xml = tmp_path.parent / f"{tmp_path.name}.xml"
    argv = ["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path), "--json", "--junit", str(xml)]
    assert main(argv) == 1
    out = strict_loads(capsys.readouterr().out)
    cases = {case.get("name"): case for case in ElementTree.parse(xml).getroot().iter("testcase")}
    failure = cases["hgx-02"].find("failure")
    assert failure is not None and failure.get("message", "").startswith("UNKNOWN")
    assert cases["hgx-01"].find("failure") is None
    assert out["schema"] == "clusterctl.check-health/2"
    assert [(c["node"], c["busbw_gb_s"]) for c in out["collectives"]] == [("hgx-01", 480.0), ("hgx-02", 0.0)]
    assert out["nodes"]["hgx-02"]["verdict"] == "unknown"
    assert out["nodes"]["hgx-02"]["active"]["collective"]["status"] == "unknown"
    assert out["nodes"]["hgx-01"]["active"]["collective"]["status"] in ("ok", "warn")


def test_each_tier_is_bounded_and_help_states_the_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    for level, tier in TIERS.items():
        script = collection_script(health_collectors(level=level))
        for collector in health_collectors(level=level):
            assert f"t {collector.timeout_s} " in script
        assert sum(c.timeout_s for c in tier.collectors()) == tier.script_s()
    assert main(["check", "health", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    standard, burn_in = TIERS["standard"], TIERS["burn-in"]
    for phrase in (
        f"({standard.h2d_s} s)",
        f"`dcgmi diag -r 2` ({standard.dcgm_s} s)",
        f"--timeout {DEFAULT_TIMEOUT_S + standard.script_s():g} s",
        f"at most {standard.collective_s} s each",
        f"`dcgmi diag -r 3` ({burn_in.dcgm_s} s; default --timeout {DEFAULT_TIMEOUT_S + burn_in.script_s():g} s",
        f"{burn_in.collective_runs} runs of every size, at most {burn_in.collective_s} s each",
    ):
        assert phrase in text, phrase


def test_an_unknown_level_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "health", "-i", str(INVENTORY), "--level", "deep", "--from", "nowhere"]) == 2
    assert "--level 'deep'" in capsys.readouterr().err


@pytest.mark.parametrize(("level", "max_bytes"), [("standard", "--max-bytes=4194304"), ("burn-in", None)])
def test_the_single_node_collective_on_cpus_is_the_allreduce_on_two_ranks_of_one_node(
    level: str, max_bytes: str | None
) -> None:
    inventory = load_inventory(CPU_INVENTORY)
    node = inventory.nodes[1].name
    workload = collective_workload(inventory, all_sizes=TIERS[level].all_sizes)  # type: ignore[index]
    plan = group_plan(sub_inventory(inventory, [node]), workload, node_ranks(inventory))
    assert [(h.node, h.slots) for h in plan.hosts] == [(node, 2)] and plan.world_size == 2
    assert workload.name == "allreduce" and not plan.gpu
    assert [a for a in plan.rank_argv if a.startswith("--max-bytes")] == ([max_bytes] if max_bytes else [])


def test_the_single_node_collective_on_gpus_is_nccl_tests_over_every_gpu_of_the_node() -> None:
    inventory = load_inventory(INVENTORY)
    node = inventory.nodes[1]
    plan = group_plan(
        sub_inventory(inventory, [node.name]), collective_workload(inventory), node_ranks(inventory)
    )
    assert plan.gpu and plan.world_size == node.gpus.count == 8
    assert any("all_reduce_perf" in a for a in plan.rank_argv)
