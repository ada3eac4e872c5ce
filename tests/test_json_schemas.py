"""Every `--json` output names its schema version (issue 37): explain, inspect and `run --dry-run` (both
launchers) follow the `clusterctl.<name>/<n>` pattern of check-topology, check-health and report-row."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clusterctl.cli import main
from clusterctl.paths import data_dir
from tests.fixtures import FIXTURES
from tests.helpers.strictjson import strict_loads

SANDBOX = data_dir("inventories") / "sandbox-example.yml"


def test_inspect_json_objects_carry_their_schema(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted((FIXTURES / "ibstat").glob("*.txt"))[:2]
    assert main(["inspect", "--json", *map(str, files)]) in (0, 1)
    items = strict_loads(capsys.readouterr().out)
    assert len(items) == 2 and all(item["schema"] == "clusterctl.inspect/1" for item in items)
    assert list(items[0])[:2] == ["schema", "file"]


def test_run_dry_run_json_carries_its_schema_with_either_launcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "allreduce", "-i", str(SANDBOX), "--dry-run", "--json"]) == 0
    [plan] = strict_loads(capsys.readouterr().out)
    assert plan["schema"] == "clusterctl.run-dry-run/1" and plan["command"].startswith("mpirun ")

    document = yaml.safe_load(SANDBOX.read_text())
    document["slurm"] = {"login": {"address": "10.213.0.11"}, "run_dir": "/shared/clusterctl", "runtime": "docker",
                         "image": "clusterctl/sandbox:cpu-0123456789ab"}  # fmt: skip
    inventory = tmp_path / "slurm.yml"
    inventory.write_text(yaml.safe_dump(document))
    argv = ["run", "allreduce", "-i", str(inventory), "--launcher", "slurm", "--dry-run", "--json"]
    assert main(argv) == 0
    [script] = strict_loads(capsys.readouterr().out)
    assert script["schema"] == "clusterctl.run-dry-run/1" and script["launcher"] == "slurm"


def test_an_empty_report_still_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A bare `[]` said nothing of its version; the report is an object whose rows may be none.
    assert main(["report", "--runs-dir", str(tmp_path), "--json"]) == 0
    assert strict_loads(capsys.readouterr().out) == {"schema": "clusterctl.report/1", "rows": []}
