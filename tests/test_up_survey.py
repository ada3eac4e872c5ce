"""What `up` decides from its read-only survey, and what `up --dry-run` shows of it: the mount-source
probe (run in a real shell), the refusal order, and the per-node plan lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterctl.containers.lifecycle import (
    MountSourceMissing,
    NodeOutcome,
    UpConflict,
    up_plan_of,
    up_refusal,
)
from clusterctl.containers.plan import (
    Action,
    Found,
    mount_probe,
    mount_sources,
    parse_mount_probe,
    plan_line,
)
from clusterctl.errors import StepError
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir

PAPER = data_dir("inventories") / "paper-c4140.yml"


def _found(node: str, action: Action, **kwargs: object) -> Found:
    return Found(node, action, "sha256:w", f"clusterctl-c-{node}", **kwargs)  # type: ignore[arg-type]


def test_mount_sources_are_the_inventorys_mounts_only() -> None:
    assert mount_sources(load_inventory(PAPER)) == ["/home/dell/imagenet_tfrecords", "/home/dell/benchmarks"]


def test_mount_probe_reports_exactly_the_missing_paths_in_a_real_shell(tmp_path: Path) -> None:
    directory, file = tmp_path / "data", tmp_path / "it's a file"
    directory.mkdir()
    file.write_text("x")
    absent, odd = tmp_path / "benchmarks", tmp_path / "a b; touch pwned"
    command = mount_probe([str(directory), str(absent), str(file), str(odd)])
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert parse_mount_probe(done.stdout) == [str(absent), str(odd)]
    assert not (tmp_path / "pwned").exists()  # the path stayed one quoted word
    assert not absent.exists()  # the probe creates nothing


def test_missing_mount_sources_refuse_up_naming_node_path_and_file() -> None:
    inventory = load_inventory(PAPER)
    survey: dict[str, Found | NodeOutcome] = {
        "c4140-1": _found("c4140-1", Action.REPLACE, missing_mounts=["/home/dell/benchmarks"]),
        "c4140-2": _found("c4140-2", Action.REPLACE),
    }
    refusal = up_refusal(survey, inventory)
    assert isinstance(refusal, MountSourceMissing) and refusal.exit_code == 2
    message = str(refusal)
    assert "up: mount sources are missing on c4140-1; nothing was started on any node" in message
    assert "  c4140-1: /home/dell/benchmarks" in message
    assert "c4140-2" not in message
    assert f"container.mounts[].source in {PAPER}" in message


def test_refusal_order_unreachable_then_mounts_then_conflicts() -> None:
    inventory = load_inventory(PAPER)
    conflict = _found(
        "c4140-2", Action.CONFLICT, container_id="abc", state="running", differs="settings differ"
    )
    missing = _found("c4140-1", Action.REPLACE, missing_mounts=["/home/dell/benchmarks"])
    unreachable = NodeOutcome("c4140-1", error="host unreachable")
    assert isinstance(up_refusal({"c4140-1": unreachable, "c4140-2": conflict}, inventory), StepError)
    assert not isinstance(up_refusal({"c4140-1": unreachable, "c4140-2": conflict}, inventory), UpConflict)
    assert isinstance(up_refusal({"c4140-1": missing, "c4140-2": conflict}, inventory), MountSourceMissing)
    only_conflict = up_refusal({"c4140-1": _found("c4140-1", Action.KEEP), "c4140-2": conflict}, inventory)
    assert isinstance(only_conflict, UpConflict) and "c4140-2" in str(only_conflict)
    assert up_refusal({"c4140-1": _found("c4140-1", Action.KEEP)}, inventory) is None


def test_dry_run_plan_lists_secondaries_then_primary_with_the_run_line_of_what_it_starts() -> None:
    inventory = load_inventory(PAPER)
    survey: dict[str, Found | NodeOutcome] = {
        "c4140-1": _found("c4140-1", Action.REPLACE),
        "c4140-2": NodeOutcome("c4140-2", error="host unreachable"),
    }
    plan = up_plan_of(survey, inventory, "bench:1")
    lines = plan.lines()
    assert lines[:2] == [
        "c4140-2 (secondary): unknown (host unreachable)",
        "c4140-1 (primary): start clusterctl-c-c4140-1",
    ]
    assert lines[2].startswith("  docker run -d --name clusterctl-paper-c4140-c4140-1 ")
    assert lines[2].endswith(" bench:1") and len(lines) == 3
    assert isinstance(plan.refusal, StepError) and "cannot check c4140-2" in str(plan.refusal)

    kept: dict[str, Found | NodeOutcome] = {
        name: _found(name, Action.KEEP, container_id="a", state="running") for name in survey
    }
    plan = up_plan_of(kept, inventory, "bench:1")
    assert [n.docker_run for n in plan.nodes] == [None, None] and plan.refusal is None


@pytest.mark.parametrize(
    ("found", "line"),
    [
        (
            _found("n1", Action.KEEP, container_id="a", state="running"),
            "keep clusterctl-c-n1 (running, spec unchanged)",
        ),
        (_found("n1", Action.REPLACE), "start clusterctl-c-n1"),
        (
            _found("n1", Action.REPLACE, container_id="a", state="exited", differs="image differs"),
            "replace clusterctl-c-n1 (was exited; image differs)",
        ),
        (
            _found(
                "n1",
                Action.CONFLICT,
                container_id="a",
                state="running",
                differs="settings differ",
                processes=["python3"],
            ),
            "conflict: clusterctl-c-n1 is running; settings differ; running python3; up refuses unless --force-recreate",
        ),
        (
            _found("n1", Action.REPLACE, missing_mounts=["/srv/data"]),
            "start clusterctl-c-n1; REFUSED: mount source missing: /srv/data",
        ),
    ],
    ids=["keep", "start", "replace", "conflict", "missing-mount"],
)
def test_dry_run_line_says_what_up_would_do(found: Found, line: str) -> None:
    assert plan_line(found) == line
