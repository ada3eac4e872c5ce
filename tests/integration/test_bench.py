"""The bench/ scripts' short forms (one repeat) run end to end, so they cannot rot.

Each runs as a user runs it (a fresh process) and must print its table and write its JSON with every
figure present and positive. No time is asserted: the figures are reported by the scripts, never
enforced. The delivery and fanout benches share a 1-node sandbox of this module's (``--sandbox-state``),
delivery first: it empties the node and leaves it holding the image, which fanout's untimed push then
finds there; fanout provisions the node, which the session sandbox must not be (test_provision needs it
unprovisioned). A sandbox and a 1.4 GB image stream fewer than one each. The run-overhead bench measures
on the session sandbox with the image the ``cluster`` fixture delivers there for the other tests anyway.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from clusterctl.inventory import Inventory
from tests.integration.conftest import Sandbox, private_sandbox

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


@pytest.fixture(scope="module")
def sandbox1(tmp_path_factory: pytest.TempPathFactory, sandbox2: Sandbox) -> Iterator[Sandbox]:
    """A 1-node sandbox (no Slurm) for the delivery and fanout short forms, as either bench would make.

    After the session sandbox (``sandbox2``), though it does not use it: each points CLUSTERCTL_STATE_DIR
    at itself while it is up and puts back what was there before on the way out, so this one must come
    up after the session's and go first. The other way round, its end would unset the variable under the
    session sandbox, and a later ``sandbox up`` of the session's would plan a sandbox of the default
    state directory (another subnet, another registry CA) over the session's containers."""
    del sandbox2
    with private_sandbox(tmp_path_factory, "itb", 1) as sandbox:
        yield sandbox


def _run_on(sandbox: Sandbox, script: str, tmp_path: Path, *args: str) -> tuple[str, dict]:
    """``_run`` on a running sandbox (``--sandbox-state``), which the bench must leave as it found it:
    every node still running. On the session sandbox the caller asks for ``cluster``, so the image is
    built and delivered as every other test has it (the inventory's transport, the registry:
    test_push_interrupt needs its layers there) and the bench's untimed push finds every node holding it."""
    ran = _run(script, tmp_path, *args, "--sandbox-state", str(sandbox.state_dir))
    engine = docker.from_env(timeout=30)
    names = [f"clusterctl-{sandbox.name}-{node.name}" for node in sandbox.inventory.nodes]
    assert [engine.containers.get(name).status for name in names] == ["running"] * len(names)
    return ran


def test_delivery_short_form(tmp_path: Path, sandbox1: Sandbox) -> None:
    stdout, figures = _run_on(sandbox1, "delivery.py", tmp_path, "--nodes", "1", "--transports", "stream")
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


def test_fanout_short_form(tmp_path: Path, sandbox1: Sandbox) -> None:
    # After the delivery short form (file order), on the same sandbox: the node holds the image already.
    args = ["--nodes", "1", "--repeats", "1", "--transport", "stream"]
    stdout, figures = _run_on(sandbox1, "fanout.py", tmp_path, *args)
    medians = figures["median_s"]["1"]
    assert set(medians) == {"check topology", "provision (no-op)", "status", "up + down"}
    assert all(seconds > 0 for seconds in medians.values())
    assert "| nodes |" in stdout


def test_run_overhead_short_form(tmp_path: Path, sandbox2: Sandbox, cluster: Inventory) -> None:
    stdout, figures = _run_on(sandbox2, "run_overhead.py", tmp_path, "--nodes", "1", "--repeats", "1")
    one = figures["figures"]["1"]
    assert one["run_s"] > 0 and one["payload_s"] > 0
    assert one["overhead_s"] == pytest.approx(one["run_s"] - one["payload_s"])
    assert "overhead" in stdout
