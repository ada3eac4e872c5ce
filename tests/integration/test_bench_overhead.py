"""The run-overhead bench's short form (one repeat) on the session sandbox, with the image the ``cluster``
fixture delivers there for the other tests anyway; it prints its table and writes its JSON with every
figure present and positive (no time asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.inventory import Inventory
from tests.helpers.benchrun import run_bench_on
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.integration


def test_run_overhead_short_form(tmp_path: Path, sandbox2: Sandbox, cluster: Inventory) -> None:
    stdout, figures = run_bench_on(sandbox2, "run_overhead.py", tmp_path, "--nodes", "1", "--repeats", "1")
    one = figures["figures"]["1"]
    assert one["run_s"] > 0 and one["payload_s"] > 0
    assert one["overhead_s"] == pytest.approx(one["run_s"] - one["payload_s"])
    assert "overhead" in stdout
