"""Running a bench/ script's short form as a user runs it (a fresh process), for the bench tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docker

from tests.helpers.sandbox import Sandbox

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench(script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / f"{script}.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["machine"]["cpus"] >= 1 and figures["machine"]["date"]
    return done.stdout, figures


def run_bench_on(sandbox: Sandbox, script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
    """``run_bench`` on a running sandbox (``--sandbox-state``), which the bench must leave as it found it:
    every node still running. On the session sandbox the caller asks for ``cluster``, so the image is
    built and delivered as every other test has it (the inventory's transport, the registry:
    test_push_interrupt needs its layers there) and the bench's untimed push finds every node holding it."""
    ran = run_bench(script, tmp_path, *args, "--sandbox-state", str(sandbox.state_dir))
    engine = docker.from_env(timeout=30)
    names = [f"clusterctl-{sandbox.name}-{node.name}" for node in sandbox.inventory.nodes]
    assert [engine.containers.get(name).status for name in names] == ["running"] * len(names)
    return ran
