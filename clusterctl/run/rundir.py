"""The run directory: its name, and its files written once (``clusterctl.results.record`` lists them).

A second run in the same second gets a ``-2``, ``-3``... suffix; nothing is ever overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, write_bundle
from clusterctl.inventory import Inventory
from clusterctl.results.record import RESULT_FILE, RunRecord
from clusterctl.results.telemetry import telemetry_path
from clusterctl.results.traces import TRACE_DIR
from clusterctl.run.launchers.mpirun import Mpirun, shell_command
from clusterctl.workloads.job import Job


def new_run_id(workload: str, nodes: int, now: datetime | None = None) -> str:
    """``<UTC time>_<workload>_<nodes>n``, e.g. ``20250101T120000Z_resnet50_2n``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}_{workload}_{nodes}n"


def new_run_dir(runs_dir: Path, run_id: str) -> Path:
    """A new, empty run directory for ``run_id`` under ``runs_dir``: its name is the run's id.

    A second run in the same second gets a ``-2``, ``-3``... suffix; nothing is overwritten.
    """
    runs_dir.mkdir(parents=True, exist_ok=True)
    directory = runs_dir / run_id
    n = 1
    while True:
        try:
            directory.mkdir()
            return directory
        except FileExistsError:
            n += 1
            directory = runs_dir / f"{run_id}-{n}"


def write_run_dir(
    directory: Path,
    inventory: Inventory,
    plan: Job,
    output: str,
    record: RunRecord,
    *,
    command: str | None = None,
    bundles: Mapping[str, Mapping[str, NodeBundle]] | None = None,
    telemetry: Mapping[str, str] | None = None,
    traces: Mapping[str, bytes] | None = None,
) -> Path:
    """Write the files of ``record`` into its run directory (made by ``new_run_dir``) and return its path.

    ``command``: what ran (None: the job's mpirun command); ``bundles``: snapshots the launch took,
    by folder name (``topology``, ``topology-after``); ``telemetry``: each node's samples (JSON Lines),
    by node name, written to ``telemetry/<node>.jsonl``; ``traces``: ``run --trace``'s files by name
    (checked names: ``clusterctl.results.traces``), written to ``trace/``.

    Raises:
        ValueError: the record's run id is not the directory's name (the record is judged with it).
    """
    if record.run_id != directory.name:
        raise ValueError(f"record {record.run_id!r} written to the run directory {directory.name!r}")
    spec = {
        "options": plan.options.model_dump(mode="json"),
        "hosts": [h.model_dump() for h in plan.hosts],
        "env": plan.env,
        "inventory": str(inventory.source) if inventory.source else None,
        "cluster": inventory.cluster.name,
        "image": inventory.image.model_dump(mode="json"),
    }
    (directory / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    (directory / "command.txt").write_text(
        (command or shell_command(Mpirun().command(inventory, plan))).rstrip("\n") + "\n"
    )
    (directory / "output.log").write_text(output)
    for folder, by_node in (bundles or {}).items():
        write_bundle(directory / folder, by_node)
    for node, text in (telemetry or {}).items():
        path = telemetry_path(directory, node)
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    for name, data in (traces or {}).items():
        (directory / TRACE_DIR).mkdir(exist_ok=True)
        (directory / TRACE_DIR / name).write_bytes(data)
    (directory / RESULT_FILE).write_text(record.model_dump_json(indent=2) + "\n")
    return directory
