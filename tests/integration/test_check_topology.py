"""`clusterctl check topology` (live, then `--from` its bundle) and `collect` on the 2-node sandbox (CPU,
ethernet, no GPU/IB tools)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.cli import main
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration


def test_check_topology_reports_missing_tools_and_writes_the_bundle(
    sandbox2, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    code = main(["check", "topology", "-i", str(sandbox2.inventory_path), "--json", "--bundle", str(bundle)])
    out = strict_loads(capsys.readouterr().out)
    nodes = [node.name for node in sandbox2.inventory.nodes]
    assert code == 0  # missing GPU/IB tools are info on a CPU/ethernet node; nothing is an error
    assert sorted(out["nodes"]) == sorted(nodes)
    for name in nodes:
        findings = out["nodes"][name]["findings"]
        missing = {f["message"].split()[0] for f in findings if f["code"] == "tool-missing"}
        assert {"nvidia-smi", "ibstat"} <= missing
        assert all(f["severity"] != "error" for f in findings)
        meta = json.loads((bundle / name / "meta.json").read_text())
        assert meta["unreachable"] is False
        assert meta["sections"]["ibstat"]["status"] == "missing"
        assert meta["sections"]["ip-addr"]["status"] == "ok"
        assert json.loads((bundle / name / "ip-addr.txt").read_text())  # raw `ip -j addr` output
    assert not [f for f in out["cluster_findings"] if f["severity"] == "error"]

    # The same bundle judged again from disk, no host contacted: the same findings and exit code.
    again = main(["check", "topology", "-i", str(sandbox2.inventory_path), "--json", "--from", str(bundle)])
    rejudged = strict_loads(capsys.readouterr().out)
    assert again == code
    assert rejudged.pop("bundle") == out.pop("bundle") == str(bundle)
    assert rejudged == out

    # Its human form: the summary, then the healthy nodes folded on one line, nothing else (the info
    # only with -v).
    from clusterctl.nodesets import fold

    assert main(["check", "topology", "-i", str(sandbox2.inventory_path), "--from", str(bundle)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{len(nodes)} nodes: {len(nodes)} ok; ") and "-v shows the info" in lines[0]
    assert lines[1:] == [f"{fold(nodes)}  ok"]

    # inspect reads every file of a node's part of the bundle: each has a kind, or is the meta.json.
    assert main(["inspect", "--json", *sorted(map(str, (bundle / nodes[0]).iterdir()))]) == 0
    inspected = {Path(item["file"]).name: item for item in strict_loads(capsys.readouterr().out)}
    assert inspected["ip-addr.txt"]["kind"] == "ip-addr" and inspected["peermem.txt"]["kind"] == "peermem"
    assert [f["code"] for f in inspected.pop("meta.json")["findings"]] == ["bundle-meta"]
    assert all(item["kind"] for item in inspected.values())


def test_collect_writes_only_the_bundle(sandbox2, tmp_path: Path) -> None:
    code = main(["collect", "-i", str(sandbox2.inventory_path), "-o", str(tmp_path)])
    assert code == 0
    assert sorted(p.parent.name for p in tmp_path.glob("*/meta.json")) == sorted(
        n.name for n in sandbox2.inventory.nodes
    )
