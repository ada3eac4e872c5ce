"""`up` and `up --dry-run` agree on the 2-node sandbox: the dry run shows, per node, what up would do
from the same read-only survey; a mount source missing on the nodes refuses both, starting nothing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import benchmark_containers

pytestmark = pytest.mark.integration


def test_dry_run_shows_start_then_keep_and_changes_nothing(
    cluster: Inventory, sandbox2, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    name = f"clusterctl-{cluster.cluster.name}"
    capsys.readouterr()
    assert main(["up", *inv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    for node in cluster.nodes:
        assert f"{node.name} ({node.role}): start {name}-{node.name}\n" in out
        assert f"  docker run -d --name {name}-{node.name} " in out
    assert benchmark_containers(cluster) == {node.name: [] for node in cluster.nodes}

    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    before = benchmark_containers(cluster)
    assert main(["up", *inv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    for node in cluster.nodes:
        assert f"{node.name} ({node.role}): keep {name}-{node.name} (running, spec unchanged)" in out
    assert "docker run" not in out
    assert benchmark_containers(cluster) == before


def test_missing_mount_source_refuses_up_and_its_dry_run_alike(
    cluster: Inventory, sandbox2, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"/nonexistent-clusterctl-{uuid.uuid4().hex[:8]}"
    document = yaml.safe_load(sandbox2.inventory_path.read_text())
    document.setdefault("container", {}).setdefault("mounts", []).append(
        {"source": missing, "target": "/benchmarks", "read_only": True}
    )
    path = tmp_path / "with-missing-mount.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    capsys.readouterr()

    assert main(["up", "-i", str(path), "--dry-run"]) == 2
    dry = capsys.readouterr()
    for node in cluster.nodes:
        assert (
            f"{node.name} ({node.role}): start clusterctl-{cluster.cluster.name}-{node.name}; REFUSED: "
            in dry.out
        )
        assert f"  {node.name}: {missing}" in dry.err
    assert f"container.mounts[].source in {path}" in dry.err

    assert main(["up", "-i", str(path), "--timeout", "60"]) == 2
    real = capsys.readouterr().err
    assert "mount sources are missing on" in real and "nothing was started on any node" in real
    for node in cluster.nodes:
        assert f"  {node.name}: {missing}" in real
    assert benchmark_containers(cluster) == {node.name: [] for node in cluster.nodes}
