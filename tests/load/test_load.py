"""Issue 15, part 4: an 8-node sandbox, provision + image build + image push + up + run + down three
times in a row: every command succeeds each time, the runs agree, and nothing is left behind (the
listings after each cycle's down are the same: containers, networks, volumes and processes on every
node and on the local engine, files in the state directory, child processes of the controller)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cycles import run_cycles

NODES, CYCLES = 8, 3


@pytest.mark.integration
def test_three_cycles_on_eight_nodes_agree_and_leak_nothing(tmp_path: Path) -> None:
    report = run_cycles(tmp_path / "state", nodes=NODES, cycles=CYCLES)
    assert report.failed() == []
    steps = {(s.cycle, s.name) for s in report.steps}
    assert {(c, "down") for c in range(1, CYCLES + 1)} <= steps

    # the same results: one valid run per cycle, on every node, from the same mpirun command line
    assert len(report.runs) == CYCLES
    assert all(r["valid"] and r["nodes"] == NODES and r["world_size"] == NODES for r in report.runs)
    assert len({r["config"]["framework"] for r in report.runs}) == 1
    assert len(set(report.commands)) == 1

    # provision converged once; later cycles change nothing and the image moves only once
    later = [s for s in report.steps if s.cycle > 1]
    for step in (s for s in later if s.name == "provision"):
        assert {counts["changed"] for counts in json.loads(step.stdout)["hosts"].values()} == {0}
    for step in (s for s in later if s.name == "image push"):
        assert "nothing moved: every node already holds the image" in step.stdout

    # nothing leaked: after every cycle's down, the same listing as after the first
    assert report.leaks() == {}
    first = report.snapshots[1]
    assert all(not v for k, v in first.items() if k.endswith(" containers") and not k.startswith("local"))
    assert first["controller children"] == []
