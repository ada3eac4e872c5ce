"""`--junit FILE` of `check health`, `check topology` and `check pairs`: the XML parses (xml.etree), one
testcase per node and per finding, a failure carrying the finding and its action; a path that cannot be
the file is refused before anything is judged."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clusterctl.check.pairs import PairsReport
from clusterctl.cli import main
from clusterctl.diagnostics.bundle import write_bundle
from clusterctl.diagnostics.junit import Case, junit_xml
from clusterctl.diagnostics.pairs import NodeVerdict, SlowLink
from tests.helpers.health import HEALTHY, INVENTORY, REMAP, health_bundle
from tests.helpers.topology import FIXTURE_NODE, PAPER_C4140, SECOND_NODE, saved_topology


def _cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    [suite] = root.findall("testsuite")
    cases = {c.get("name", ""): c for c in suite.findall("testcase")}
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == str(sum(c.find("failure") is not None for c in cases.values()))
    return cases


def test_check_health_junit_fails_the_node_and_its_finding_with_the_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    write_bundle(
        bundle,
        {
            "hgx-01": health_bundle("hgx-01", HEALTHY),
            "hgx-02": health_bundle("hgx-02", {**HEALTHY, "nvidia-smi-q": REMAP}),
        },
    )
    xml = tmp_path / "health.xml"
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(bundle), "--junit", str(xml)]) == 1
    cases = _cases(xml)
    assert cases["hgx-01"].find("failure") is None
    node = cases["hgx-02"].find("failure")
    assert node is not None and node.get("message", "").startswith("FAIL gpu-row-remap-pending")
    finding = cases["hgx-02 gpu-row-remap-pending"].find("failure")
    assert finding is not None and "action: Drain the node, then reset the GPU" in (finding.text or "")
    out = capsys.readouterr().out.splitlines()  # the terminal's as without --junit
    assert out[0].startswith("2 nodes: 1 FAIL, 1 OK; ") and out[2].split()[:2] == ["hgx-01", "OK"]


def test_check_topology_junit_has_every_node_and_error_finding(tmp_path: Path) -> None:
    bundle = saved_topology(tmp_path / "bundle", {"c4140-1": FIXTURE_NODE, "c4140-2": SECOND_NODE})
    xml = tmp_path / "topology.xml"
    assert (
        main(["check", "topology", "--from", str(bundle), "-i", str(PAPER_C4140), "--junit", str(xml)]) == 1
    )
    cases = _cases(xml)
    assert {"c4140-1", "c4140-2"} <= set(cases)
    failed = cases["c4140-1 peermem-missing"].find("failure")
    assert failed is not None and "action:" in (failed.text or "")
    assert cases["c4140-1"].find("failure") is not None
    assert not any(name.endswith(" ib-port-down") for name in cases)  # info findings are left out


def test_check_pairs_junit_names_the_slow_node_and_link(tmp_path: Path) -> None:
    report = PairsReport("all", 3, 0.5, None)
    report.nodes = [NodeVerdict("n1", "ok", 2.0, 2.0, "median of its peers"),
                    NodeVerdict("n2", "slow", 0.4, 2.0, "median of its peers")]  # fmt: skip
    report.links = [SlowLink(("n1", "n3"), 0.5, 2.0)]
    xml = tmp_path / "pairs.xml"
    xml.write_text(junit_xml("check pairs", report.junit_cases()))
    cases = _cases(xml)
    assert cases["n1"].find("failure") is None
    slow = cases["n2"].find("failure")
    assert slow is not None and slow.get("message") == "SLOW busbw 0.4 GB/s vs 2 GB/s median of its peers"
    link = cases["link n1 - n3"].find("failure")
    assert link is not None and "busbw 0.5 GB/s" in link.get("message", "")


def test_control_characters_from_a_node_keep_the_xml_readable(tmp_path: Path) -> None:
    xml = tmp_path / "odd.xml"
    xml.write_text(junit_xml("s", [Case("node\x1b[31m", "c", "bell\x07 <&>", "line\x00")]))
    [case] = _cases(xml).values()
    failure = case.find("failure")
    assert case.get("name") == "node\\x1b[31m" and failure is not None
    assert failure.get("message") == "bell\\x07 <&>" and failure.text == "line\\x00"


def test_a_junit_path_that_cannot_be_the_file_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "none"  # never read: the option is checked first
    for bad, why in (
        (tmp_path / "r.txt", "does not end in .xml"),
        (tmp_path / "no" / "r.xml", "not a directory"),
    ):
        assert (
            main(["check", "health", "-i", str(INVENTORY), "--from", str(bundle), "--junit", str(bad)]) == 2
        )
        assert why in " ".join(capsys.readouterr().err.split())
