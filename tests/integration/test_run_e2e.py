"""The job users come for, end to end on a real 2-node sandbox: provision, build, deliver, up, then
`clusterctl run resnet50 --nodes 2` with Horovod and with DDP across both node containers over port
50000; results parsed from rank 0, recorded, reported; down."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from clusterctl.cli import main
from tests.strictjson import strict_loads

pytestmark = pytest.mark.integration


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, strict_loads(out) if out.strip() else None


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
        with sqlite3.connect(runs / "history.sqlite") as db:
            assert db.execute("select count(*) from runs").fetchone()[0] == 2

        code, report = _json(capsys, "report", "--runs-dir", str(runs))
        assert code == 0
        assert {row["config"]["framework"] for row in report} == {"horovod", "ddp"}
        assert all(row["devices"] == 2 and row["median"] > 0 for row in report)
    finally:
        assert main(["down", *inv]) == 0
