"""`clusterctl accept` on the session's 2-node sandbox: health, topology, pairs, the collective, resnet50
on 1 node then on 2, report and explain, in one command; with a small criteria file every criterion is
listed and passes (exit 0), the JUnit file has one passing case per criterion, and the report page is
written. Kept short: one run per step, 2 measured steps of 32 px images."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import Sandbox
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration

# Thresholds a healthy sandbox meets on a 2-core machine shared with other work. Measured by hand at
# load 16-35 with these sizes: the collective 0.026-0.056 GB/s; efficiency 2% and 194% (a 2-step run is
# as noisy as the load: the 1-node run once took 24 s, once 86 s); the nodes' compute 1.5-1.6x apart,
# with nothing throttled. So the figures are only required to exist and to be judged.
CRITERIA = """\
health: {max_severity: warning}
topology: {max_severity: warning}
pairs: {tolerance: 0.95}
collective: {min_busbw_per_rail_gb_s: 0.001}
scaling: {min_efficiency: 0.001}
balance: {max_compute_ratio: 100}
"""
SMALL = ["--steps", "2", "--warmup-steps", "1", "--image-size", "32", "--timeout", "300"]


def test_accept_passes_a_healthy_sandbox_with_every_criterion_listed(
    sandbox2: Sandbox, cluster: Inventory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    criteria = tmp_path / "criteria.yml"
    criteria.write_text(CRITERIA)
    junit = tmp_path / "accept.xml"
    out = tmp_path / "accept"
    argv = ["accept", "-i", str(sandbox2.inventory_path), "--criteria", str(criteria), "--out", str(out)]
    code = main([*argv, *SMALL, "--json", "--junit", str(junit)])
    captured = capsys.readouterr()
    assert captured.out.strip(), f"exit {code}, nothing on stdout; stderr: {captured.err}"
    result = strict_loads(captured.out)
    assert result["schema"] == "clusterctl.accept/1"
    statuses = {c["name"]: c["status"] for c in result["criteria"]}
    assert statuses == dict.fromkeys(
        ("health", "topology", "pairs", "collective", "scaling", "balance"), "pass"
    ), result
    assert code == 0 and result["verdict"] == "pass", result
    assert [s["key"] for s in result["steps"]] == [
        "health", "topology", "pairs", "collective", "run-1", "run-2", "report", "explain"
    ], result  # fmt: skip
    assert all(s["status"] == "done" for s in result["steps"]), result
    assert result["explanation"], result
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == list(statuses)
    assert all(c.find("failure") is None for c in cases)
    assert (out / "report" / "index.html").is_file()
