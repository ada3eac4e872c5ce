"""The job users come for, end to end on a real 2-node sandbox: provision, build, deliver, up, then
`clusterctl run resnet50 --nodes 2` with Horovod and with DDP across both node containers over port
50000; results parsed from rank 0, recorded, reported; down."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from clusterctl.cli import main
from clusterctl.results.record import read_record
from clusterctl.results.telemetry import load_telemetry
from tests.helpers.sandbox import Sandbox, on_node
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, strict_loads(out) if out.strip() else None


def _assert_telemetry(sandbox2: Sandbox, directory: Path) -> None:
    """Every node's samples, taken on the node during the run: its CPUs and its fabric interface busy
    (the gradients crossed it), unknown only what the sandbox has not (GPUs, NFS); no sampler left."""
    record = read_record(directory)
    telemetry = load_telemetry(directory)
    assert sorted(telemetry) == ["node1", "node2"]
    written = (directory / "result.json").stat().st_mtime
    for node, samples in telemetry.items():
        assert len(samples) >= 3, (node, samples)
        assert record.started_at.timestamp() <= samples[0].t < samples[-1].t <= written
        interface = sandbox2.inventory.node(node).fabric.interface
        assert any(s.cpu is not None and s.cpu.util for s in samples[1:])
        assert sum(s.net[interface].rx_Bps or 0 for s in samples if s.net) > 0, (node, interface)
        assert record.telemetry_unknown is not None
        assert "gpus" in record.telemetry_unknown[node]
        assert not {"cpu", "memory", "load", "net"} & set(record.telemetry_unknown[node])
        assert not any(u.startswith("sampler") for u in record.telemetry_unknown[node])
        assert "clusterctl-nodesampler" not in on_node(sandbox2, node, "ps", "-eo", "args=")


def test_resnet50_on_two_nodes_end_to_end(
    sandbox2, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    runs = tmp_path / "runs"
    code, _ = _json(capsys, "provision", *inv)
    assert code == 0
    assert main(["image", "build", *inv]) == 0
    assert main(["image", "push", *inv]) == 0
    assert main(["up", *inv]) == 0
    capsys.readouterr()
    try:
        results = {}
        for framework in ("horovod", "ddp"):
            code = main(
                [
                    "run",
                    "resnet50",
                    *inv,
                    "--nodes",
                    "2",
                    "--framework",
                    framework,
                    "--runs-dir",
                    str(runs),
                    "--json",
                ]
            )
            captured = capsys.readouterr()
            assert code == 0, captured.err[-3000:]
            (record,) = strict_loads(captured.out)["runs"]
            results[framework] = record
            # rank 0's tagged result line was streamed live; mpirun had nothing to warn about
            assert "[1,0]<stdout>:CLUSTERCTL_RESULT" in captured.err
            assert "Warning" not in captured.err
        for framework, record in results.items():
            assert record["valid"], record
            assert record["config"]["framework"] == framework
            assert record["world_size"] == 2 and record["nodes"] == 2
            assert record["metrics"]["total_images_per_sec"]["value"] > 0

        run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
        assert len(run_dirs) == 2
        for directory in run_dirs:
            for name in ("spec.json", "command.txt", "output.log", "result.json"):
                assert (directory / name).is_file(), f"{directory.name} lacks {name}"
            command = (directory / "command.txt").read_text()
            assert "-p 50000" in command and "StrictHostKeyChecking=yes" in command
            hosts = sandbox2.inventory.nodes
            assert f"{hosts[0].fabric_ip}:1,{hosts[1].fabric_ip}:1" in command
            assert {p.name for p in (directory / "topology").iterdir()} == {"node1", "node2"}
            assert "PRIVATE KEY" not in "".join(
                p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file()
            )
            _assert_telemetry(sandbox2, directory)
        with sqlite3.connect(runs / "history.sqlite") as db:
            assert db.execute("select count(*) from runs").fetchone()[0] == 2

        code, report = _json(capsys, "report", "--runs-dir", str(runs))
        assert code == 0 and report is not None and report["schema"] == "clusterctl.report/1"
        report = report["rows"]
        assert {row["config"]["framework"] for row in report} == {"horovod", "ddp"}
        assert all(row["devices"] == 2 and row["median"] > 0 for row in report)
    finally:
        assert main(["down", *inv]) == 0
