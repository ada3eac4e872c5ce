"""`clusterctl accept`'s pure halves: the plan (steps in order, each with its bound), the criteria file
(defaults, unknown keys and bad values refused with file, line, field and fix: exit 2), each criterion's
verdict, the JSON and JUnit forms, and `--plan`'s output (80 columns, nothing contacted)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clusterctl.accept.criteria import Criteria, load_criteria
from clusterctl.accept.plan import AcceptOptions, nodes_after, pair_groups, plan_accept
from clusterctl.accept.verdict import (
    AcceptResult,
    CriterionResult,
    NodeCheck,
    busbw_threshold,
    judge_balance,
    judge_collective,
    judge_pairs,
    judge_scaling,
    judge_severity,
    with_explained,
)
from clusterctl.cli import main
from clusterctl.cli.accept import junit_cases
from clusterctl.errors import InputError
from tests.helpers.strictjson import strict_loads

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
H100 = ROOT / "inventories" / "modern-h100.yml"


# Real run directories of a 1- and a 2-node scaling pair, each with its breakdown (explain's fixtures).
SCALING_RUNS = Path(__file__).parent / "fixtures" / "explain" / "scaling"


def test_plan_runs_the_steps_in_order_each_with_its_bound() -> None:
    plan = plan_accept(["node1", "node2"], AcceptOptions(repeats=2, pairs_repeats=2, run_timeout_s=100))
    assert [s.key for s in plan.steps] == [
        "health", "topology", "pairs", "collective", "run-1", "run-2", "report", "explain"
    ]  # fmt: skip
    bounds = {s.key: s.bound_s for s in plan.steps}
    assert bounds == {"health": 180, "topology": 180, "pairs": 1 * 2 * 100, "collective": 100,
                      "run-1": 200, "run-2": 200, "report": None, "explain": None}  # fmt: skip
    assert plan.bound_s == 180 + 180 + 200 + 100 + 200 + 200


def test_plan_adds_the_active_level_and_drops_what_one_node_cannot_run() -> None:
    standard = plan_accept(["a", "b", "c"], AcceptOptions(level="standard"))
    assert [s.key for s in standard.steps][:3] == ["health", "health-standard", "topology"]
    active = standard.steps[1]
    # the collection (180 s), nvbandwidth (120 s) and dcgmi diag (600 s), then 3 nodes x 1 run x 120 s
    assert active.bound_s == 180 + 120 + 600 + 3 * 120
    alone = plan_accept(["a"], AcceptOptions())
    assert [s.key for s in alone.steps] == ["health", "topology", "run-1", "report", "explain"]
    with pytest.raises(ValueError):
        plan_accept([], AcceptOptions())


def test_a_bad_node_is_left_out_or_stops_the_acceptance() -> None:
    nodes = ["node1", "node2", "node3"]
    assert nodes_after("health", nodes, [], "stop") == nodes
    assert nodes_after("health", nodes, ["node2"], "exclude") == ["node1", "node3"]
    assert nodes_after("health", nodes, ["node2"], "stop") == "health failed on node2"
    assert nodes_after("pairs", nodes, nodes, "exclude") == "pairs failed on node1, node2, node3"
    assert nodes_after("topology", nodes, ["(cluster)"], "exclude") == "topology failed on (cluster)"


@pytest.mark.parametrize(("nodes", "groups"), [(2, 1), (4, 6), (8, 28), (9, 11), (16, 11), (128, 17)])
def test_pair_groups_bound_the_auto_search(nodes: int, groups: int) -> None:
    assert pair_groups(nodes) == groups


def test_criteria_default_and_read(tmp_path: Path) -> None:
    assert load_criteria(None) == Criteria()
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    assert load_criteria(empty) == Criteria()
    path = tmp_path / "c.yml"
    path.write_text("scaling: {min_efficiency: 0.4}\ncollective:\n  min_busbw_per_rail_gb_s: 0.01\n")
    criteria = load_criteria(path)
    assert criteria.scaling.min_efficiency == 0.4
    assert criteria.collective.min_busbw_per_rail_gb_s == 0.01
    assert criteria.pairs.tolerance == 0.5 and criteria.health.max_severity == "warning"


@pytest.mark.parametrize(
    ("text", "line", "field", "fix"),
    [
        ("scaling:\n  min_efficency: 0.4\n", 2, "scaling.min_efficency", "allowed: min_efficiency"),
        ("pairs: {tolerance: 2}\n", 1, "pairs.tolerance", "smaller number"),
        ("health:\n  max_severity: error\n", 2, "health.max_severity", "one of the values"),
        ("busbw: 3\n", 1, "busbw", "allowed: health, topology, pairs, collective, scaling, balance"),
        ("balance: {max_compute_ratio: 0.5}\n", 1, "balance.max_compute_ratio", "larger number"),
        ("collective: {min_busbw_per_rail_gb_s: .nan}\n", 1, "collective.min_busbw_per_rail_gb_s", "finite"),
    ],
)
def test_bad_criteria_exit_2_naming_file_line_field_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, field: str, fix: str
) -> None:
    path = tmp_path / "criteria.yml"
    path.write_text(text)
    code = main(["accept", "-i", str(SANDBOX), "--criteria", str(path), "--plan"])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert code == 2, err
    assert captured.out == ""
    assert f"{path}, line {line}, field {field}:" in err and "Fix:" in err and fix in err, err


def test_a_criteria_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.yml"
    path.write_text("- scaling\n")
    with pytest.raises(InputError, match="is a mapping"):
        load_criteria(path)


def test_severity_criterion_fails_above_the_threshold_and_when_unknown() -> None:
    nodes = [
        NodeCheck("node1", "warning", False, "ib-port-flap: ..."),
        NodeCheck("node2", "error", False, "xid-79: fell off the bus"),
        NodeCheck("node3", "none", True, "could not check: dmesg"),
    ]
    loose = judge_severity("health", nodes, "warning")
    assert loose.status == "fail" and loose.nodes == ("node2", "node3")
    assert "xid-79" in loose.evidence and "node1" not in loose.evidence
    strict = judge_severity("health", nodes, "info")
    assert strict.nodes == ("node1", "node2", "node3")
    ok = judge_severity("topology", [NodeCheck("node1", "info", False, "x")], "info")
    assert ok.status == "pass" and ok.nodes == ()


def test_pairs_criterion_names_slow_nodes_and_links() -> None:
    ok = judge_pairs([("a", "ok", "busbw 1 GB/s"), ("b", "ok", "busbw 1 GB/s")], [], 0.5)
    assert ok.status == "pass" and "a: busbw 1 GB/s" in ok.evidence
    slow = judge_pairs([("a", "ok", "x"), ("b", "slow", "busbw 0.1 GB/s vs 1 GB/s")], ["a - c: 0.2"], 0.5)
    assert slow.status == "fail" and slow.nodes == ("b",)
    assert "b SLOW" in slow.evidence and "slow link a - c" in slow.evidence


def test_busbw_threshold_prefers_the_file_then_the_baseline_per_rail() -> None:
    assert busbw_threshold(3.0, ("the floor of baseline b", 160.0), 8) == (3.0, "criteria file")
    assert busbw_threshold(None, ("the floor of baseline b", 160.0), 8) == (
        20.0,
        "the floor of baseline b / 8 rail(s)",
    )
    assert busbw_threshold(None, None, 1)[0] is None


def test_collective_criterion_per_rail() -> None:
    assert judge_collective(160.0, None, 8, (20.0, "x")).status == "pass"
    low = judge_collective(150.0, None, 8, (20.0, "x"))
    assert low.status == "fail" and "18.8 GB/s per rail" in low.evidence
    assert judge_collective(1.0, None, 1, (None, "no baseline")).status == "no-threshold"
    broken = judge_collective(None, "r1: exit code 1", 1, (0.01, "criteria file"))
    assert broken.status == "fail" and "r1: exit code 1" in broken.evidence


def test_scaling_criterion_from_the_file_a_reference_or_none() -> None:
    assert judge_scaling(0.5, 2, 0, 0.4, None).status == "pass"
    assert judge_scaling(0.5, 2, 0, 0.001, None).threshold == ">= 0.10% (criteria file)"
    assert judge_scaling(0.3, 2, 0, 0.4, None).status == "fail"
    by_reference = judge_scaling(0.79, 8, 0, None, ("dell-c4140", 0.8075))
    assert by_reference.status == "fail" and "reference dell-c4140" in by_reference.threshold
    assert judge_scaling(0.5, 2, 0, None, None).status == "no-threshold"
    invalid = judge_scaling(0.9, 2, 1, 0.4, None)
    assert invalid.status == "fail" and "1 invalid run(s)" in invalid.evidence


def test_balance_names_the_slow_node_above_the_ratio() -> None:
    message = "node node2 computes 3.0x slower than node node1 (900 vs 300 ms per step)"
    slow = judge_balance(3.0, "node2", message, 1.5)
    assert slow.status == "fail" and slow.nodes == ("node2",) and slow.evidence == message
    assert judge_balance(1.2, "node2", "x", 1.5).status == "pass"
    assert judge_balance(None, None, "no breakdown", 1.5).status == "no-threshold"


def test_explain_names_the_node_of_a_failed_scaling_criterion() -> None:
    failed = judge_scaling(0.2, 2, 0, 0.4, None)
    named = with_explained(failed, {"node2": "straggler: node2 computes 3x longer"})
    assert named.nodes == ("node2",) and "explain: node2: straggler" in named.evidence
    passed = with_explained(judge_scaling(0.9, 2, 0, 0.4, None), {"node2": "x"})
    assert passed.status == "pass" and passed.nodes == ()
    assert with_explained(failed, {}) is failed


def _result(*criteria: CriterionResult, stopped: str | None = None) -> AcceptResult:
    return AcceptResult(criteria=list(criteria), stopped=stopped)


def test_the_verdict_lists_every_criterion_and_fails_on_any_failure_or_stop() -> None:
    passing = [CriterionResult(name, "pass", "t", "e") for name in ("health", "topology", "pairs")]
    result = _result(*passing, CriterionResult("collective", "no-threshold", "t", "e"),
                     CriterionResult("scaling", "pass", "t", "e"), CriterionResult("balance", "pass", "t", "e"))  # fmt: skip
    assert result.verdict == "pass"
    data = result.to_json()
    assert data["schema"] == "clusterctl.accept/1" and data["verdict"] == "pass"
    criteria = data["criteria"]
    assert isinstance(criteria, list)
    assert [c["name"] for c in criteria] == [
        "health",
        "topology",
        "pairs",
        "collective",
        "scaling",
        "balance",
    ]

    stopped = _result(
        CriterionResult("health", "fail", "t", "e", ("node2",)), stopped="health failed on node2"
    )
    assert stopped.verdict == "fail" and stopped.named == ["node2"]
    statuses = {c.name: c.status for c in stopped.completed()}
    assert statuses == {"health": "fail", "topology": "skipped", "pairs": "skipped", "collective": "skipped",
                        "scaling": "skipped", "balance": "skipped"}  # fmt: skip
    assert _result(*passing, stopped="the collective failed").verdict == "fail"


def test_junit_has_one_case_per_criterion(tmp_path: Path) -> None:
    from clusterctl.diagnostics.junit import junit_xml

    result = _result(CriterionResult("health", "pass", "t", "fine"),
                     CriterionResult("topology", "fail", "t", "node2: no ib", ("node2",)),
                     stopped="topology failed on node2")  # fmt: skip
    root = ET.fromstring(junit_xml("accept", junit_cases(result)))
    cases = {c.get("name"): c.find("failure") for c in root.iter("testcase")}
    assert list(cases) == ["health", "topology", "pairs", "collective", "scaling", "balance"]
    assert cases["health"] is None
    assert all(cases[name] is not None for name in ("topology", "pairs", "collective", "scaling", "balance"))


def test_plan_prints_every_step_with_its_bound_in_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accept", "-i", str(H100), "--plan", "--timeout", "300", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "accept plan: 8 steps on hgx-01, hgx-02; at most 2,460 s on the hosts", out
    assert all(len(line) <= 80 for line in lines), out
    for key, bound in [("health", "180 s"), ("topology", "180 s"), ("pairs", "600 s"), ("collective", "300 s"),
                       ("run-1", "600 s"), ("run-2", "600 s"), ("report", "local"), ("explain", "local")]:  # fmt: skip
        assert any(line.split()[1:3] == [key, *bound.split()[:1]] for line in lines), (key, out)
    # 8 HCAs, no baseline for 2 x 8 H100 over InfiniBand: the busbw is shown, not judged
    assert "collective  shown (no baseline for this hardware)" in out
    assert "balance     slowest node's compute at most 1.5x the fastest's" in out


def test_plan_json_resolves_the_busbw_default_from_the_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The 2 x 8 x H100 RoCE baseline (464.8 GB/s less 15%), over this inventory's 8 HCA ports.
    roce = tmp_path / "roce.yml"
    roce.write_text(H100.read_text().replace("kind: infiniband", "kind: roce"))
    assert "kind: roce" in roce.read_text()
    assert main(["accept", "-i", str(roce), "--plan", "--json"]) == 0
    data = strict_loads(capsys.readouterr().out)
    assert data["schema"] == "clusterctl.accept-plan/1"
    assert [s["key"] for s in data["steps"]][-2:] == ["report", "explain"]
    [collective] = [t for t in data["thresholds"] if t.startswith("collective")]
    assert f">= {464.8 * 0.85 / 8:.3g} GB/s per rail" in collective, collective
    assert "nccl-allreduce-2x8xh100-roce" in collective


def test_plan_takes_the_inventory_s_preflight_minimum_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(SANDBOX.read_text() + "\npreflight:\n  min_bus_bandwidth_gb_s: 2\n")
    assert main(["accept", "-i", str(inventory), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "collective  >= 2 GB/s per rail (preflight.min_bus_bandwidth_gb_s / 1 rail(s))" in out, out


def test_the_result_prints_the_verdict_first_then_every_criterion_in_80_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusterctl.cli.accept import print_result

    long = "node2 computes 2.5x slower than node1 (34152 vs 13419 ms per step); its telemetry: CPUs 100% busy"
    result = _result(CriterionResult("health", "pass", "worst finding at most warning", "2 node(s) within it"),
                     CriterionResult("balance", "fail", "slowest node's compute at most 1.5x the fastest's", long,
                                     ("node2",)))  # fmt: skip
    result.explanation = "straggler: node2 computes 2.5x slower than node1"
    print_result(result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ACCEPT FAIL: 1 criterion failed; named: node2", lines
    assert all(len(line) <= 80 for line in lines), lines
    heads = [line.split()[:2] for line in lines if line and not line.startswith(" ")][1:7]
    assert heads == [["health", "PASS"], ["topology", "SKIPPED"], ["pairs", "SKIPPED"],
                     ["collective", "SKIPPED"], ["scaling", "SKIPPED"], ["balance", "FAIL"]], lines  # fmt: skip
    assert "34152 vs 13419 ms" in " ".join(lines)
    assert lines[-1].startswith("explain: straggler")


def test_a_criterion_without_a_threshold_keeps_a_space_before_what_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a by-hand `accept` on the sandbox printed "collective  NO-THRESHOLDnone (no baseline ...)"
    from clusterctl.cli.accept import print_result

    shown = "none (no baseline for this hardware)"
    print_result(_result(CriterionResult("collective", "no-threshold", shown, "busbw 0.245 GB/s")))
    lines = capsys.readouterr().out.splitlines()
    assert f"collective  NO-THRESHOLD {shown}" in lines, lines
    assert all(len(line) <= 80 for line in lines), lines


def test_the_page_explains_the_runs_its_table_gives_a_verdict(tmp_path: Path) -> None:
    # a by-hand accept with node2 slowed: the table's verdict said straggler, while the page's verdict
    # section said "Not explained" for every run (accept wrote the page without the explanations)
    from clusterctl.cli.accept import _write_page

    runs = Path(shutil.copytree(SCALING_RUNS, tmp_path / "runs", ignore=shutil.ignore_patterns("*.md")))
    _write_page(runs, tmp_path / "page")
    html = (tmp_path / "page" / "index.html").read_text()
    assert '<section class="why" id="why-2">' in html
    assert '<p class="verdict compute-scaling"><b>compute-scaling</b>: ' in html
    unexplained = html[html.index('id="unexplained"') :].split("</p>")[0]
    assert "allreduce" in unexplained and "resnet50" not in unexplained, (
        unexplained
    )  # no breakdown: the collective
