"""The bench/ scripts' short forms (one repeat) run end to end, so they cannot rot.

Each runs as a user runs it (a fresh process) and must print its table and write its JSON with every
figure present and positive. No time is asserted: the figures are reported by the scripts, never
enforced. The delivery and fanout benches bring up their own sandbox and remove it at the end (the
fresh-sandbox path every script shares): delivery empties its nodes and fanout provisions them, so
neither can share. The run-overhead bench measures on the session sandbox (``--sandbox-state``) with the
image the ``cluster`` fixture delivers there for the other tests anyway: a sandbox and a 1.4 GB image
stream fewer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from clusterctl.inventory import Inventory
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
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


def _run_on(sandbox: Sandbox, script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
    """``_run`` on the session sandbox (``--sandbox-state``, one repeat), which the bench must leave as it
    found it: every node still running. The caller asks for ``cluster``, so the image is built and
    delivered as every other test has it (the inventory's transport, the registry: test_push_interrupt
    needs its layers there) and the bench's untimed push finds every node holding it."""
    ran = _run(script, tmp_path, *args, "--repeats", "1", "--sandbox-state", str(sandbox.state_dir))
    engine = docker.from_env(timeout=30)
    names = [f"clusterctl-{sandbox.name}-{node.name}" for node in sandbox.inventory.nodes]
    assert [engine.containers.get(name).status for name in names] == ["running"] * len(names)
    return ran


def test_fanout_short_form(tmp_path: Path) -> None:
    # Its own sandbox: the bench provisions the nodes it measures, and test_provision needs the session
    # sandbox unprovisioned.
    stdout, figures = _run("fanout.py", tmp_path, "--nodes", "1", "--repeats", "1", "--transport", "stream")
    medians = figures["median_s"]["1"]
    assert set(medians) == {"check topology", "provision (no-op)", "status", "up + down"}
    assert all(seconds > 0 for seconds in medians.values())
    assert "| nodes |" in stdout


def test_delivery_short_form(tmp_path: Path) -> None:
    stdout, figures = _run("delivery.py", tmp_path, "--nodes", "1", "--transports", "stream")
    one = figures["figures"]["1"]
    assert one["stream_first_failed"] == {}
    # The stream moves the whole image: compressed with zstd where the node has it (the sandbox's does),
    # which the cpu image's tar shrinks to about a third; plain, at least the image's size.
    (node,) = one["stream_first_nodes"].values()
    if node["compression"] == "zstd":
        assert 0.1 * one["image_bytes"] < node["bytes_moved"] < one["image_bytes"]
    else:
        assert node["compression"] == "none" and node["bytes_moved"] >= one["image_bytes"]
    assert one["stream_first_bytes_per_node"] == node["bytes_moved"]
    assert one["openssh_load_s"] > 0 and one["openssh_cat_s"] > 0 and one["stream_noop_s"] > 0
    assert one["stream_payload_only"]["bytes_per_node"] > 0
    assert "all verified" in stdout


def test_run_overhead_short_form(tmp_path: Path, sandbox2: Sandbox, cluster: Inventory) -> None:
    stdout, figures = _run_on(sandbox2, "run_overhead.py", tmp_path, "--nodes", "1")
    one = figures["figures"]["1"]
    assert one["run_s"] > 0 and one["payload_s"] > 0
    assert one["overhead_s"] == pytest.approx(one["run_s"] - one["payload_s"])
    assert "overhead" in stdout
