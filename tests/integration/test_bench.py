"""The bench/ scripts' short forms (one repeat) run end to end, so they cannot rot.

Each runs as a user runs it (a fresh process) and must print its table and write its JSON with every
figure present and positive. No time is asserted: the figures are reported by the scripts, never
enforced. The delivery, fanout and run-overhead benches share a 1-node sandbox of this module's
(``--sandbox-state``), delivery first: it empties the node and leaves it holding the image, which the
others' untimed pushes then find there; fanout provisions the node, which the session sandbox must not
be (test_provision needs it unprovisioned). A sandbox and a 1.4 GB image stream fewer than one each, and
the run-overhead bench (one node) runs in this second session, not in the session sandbox's, which is
the longer of the two.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.benchrun import run_bench_on
from tests.helpers.sandbox import Sandbox, private_sandbox

pytestmark = [pytest.mark.integration, pytest.mark.beside]


@pytest.fixture(scope="module")
def sandbox1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A 1-node sandbox (no Slurm) for the benches' short forms, as any of them would make.

    No test of this module uses the session sandbox, so this one is up and gone before the session's
    comes up (its files come first) and the two never overlap: each points CLUSTERCTL_STATE_DIR at
    itself while it is up and puts back what was there before on the way out. scripts/test.sh runs
    the module in its second session, after the unit tests (``beside``)."""
    with private_sandbox(tmp_path_factory, "itb", 1) as sandbox:
        yield sandbox


def test_delivery_short_form(tmp_path: Path, sandbox1: Sandbox) -> None:
    # Without the payload-only re-delivery: the stream moves the whole image again for it (1.3 GB, a
    # fourth of this test's cost), and the payload-only rebuild's path is the registry's, which
    # test_registry_delivery.py proves moves only the small layers.
    # Without the `cat` baseline as well: one more docker save and 1.3 GB through ssh for the wire's
    # ceiling, a figure the full run keeps.
    stdout, figures = run_bench_on(
        sandbox1, "delivery.py", tmp_path, "--nodes", "1", "--transports", "stream", "--no-payload-only",
        "--baselines", "load",
    )  # fmt: skip
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
    assert one["openssh_load_s"] > 0 and one["stream_noop_s"] > 0 and "openssh_cat_s" not in one
    assert "ssh node docker load" in stdout and "cat >/dev/null" not in stdout
    assert "stream_payload_only" not in one
    assert "all verified" in stdout


def test_fanout_short_form(tmp_path: Path, sandbox1: Sandbox) -> None:
    # After the delivery short form (file order), on the same sandbox: the node holds the image already.
    args = ["--nodes", "1", "--repeats", "1", "--transport", "stream"]
    stdout, figures = run_bench_on(sandbox1, "fanout.py", tmp_path, *args)
    medians = figures["median_s"]["1"]
    assert set(medians) == {"check topology", "provision (no-op)", "status", "up + down"}
    assert all(seconds > 0 for seconds in medians.values())
    assert "| nodes |" in stdout


def test_run_overhead_short_form(tmp_path: Path, sandbox1: Sandbox) -> None:
    # After the fanout short form (file order): the node holds the image, the benchmark container is down.
    stdout, figures = run_bench_on(sandbox1, "run_overhead.py", tmp_path, "--nodes", "1", "--repeats", "1")
    one = figures["figures"]["1"]
    assert one["run_s"] > 0 and one["payload_s"] > 0
    assert one["overhead_s"] == pytest.approx(one["run_s"] - one["payload_s"])
    assert "overhead" in stdout
