"""Rules are linear in their input like the parsers, and bundle sections are read under a cap (issue 26, 8).

The ACS rule looked for the bridges above every GPU and HCA by scanning every device: a 4 MB
`lspci -vvv` took over 30 s in `inspect` and `check topology --from`. Bundle sections were read
whole (a 300 MB section: over 60 s and 1.3 GB). The input below is a real capture (an H100 node with
PEX switches, tests/fixtures/lspci_vvv/) repeated: more devices on the same buses, the worst case
for a rule that pairs devices with bridges.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.diagnostics.bundle import MAX_OUTPUT_BYTES, META, read_bundle
from clusterctl.diagnostics.inspect import inspect_file
from clusterctl.errors import InputError
from tests.helpers.strictjson import strict_loads

LSPCI = (
    Path(__file__).parents[1]
    / "fixtures"
    / "lspci_vvv"
    / "gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
)
# CPU seconds for 4x the input over those for 1x: linear work gives about 4, quadratic about 16.
MAX_GROWTH = 8.0


# The lines of a device block the rules read; the capture's other lines are detail they skip.
RULE_LINES = re.compile(r"^\S|^\s+(?:Bus: primary=|Capabilities: \[[0-9a-f]+\] Express|ACSCtl:)")


def _lspci(copies: int) -> str:
    """The capture's device headers and the lines the rules read, ``copies`` times: the most devices
    per byte a real output can have."""
    lines = LSPCI.read_text().splitlines(keepends=True)[2:]  # without the source lines
    return "".join(line for line in lines if RULE_LINES.match(line)) * copies


def _cpu_seconds(path: Path) -> float:
    start = time.process_time()
    result = inspect_file(path, "lspci-vvv")
    seconds = time.process_time() - start
    assert result.kind == "lspci-vvv" and result.parsed["devices"]
    return seconds


def test_the_acs_rule_is_linear_in_the_devices(tmp_path: Path) -> None:
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_text(_lspci(100))  # about 0.9 MB
    large.write_text(_lspci(400))  # about 3.6 MB: minutes with the quadratic rule
    _cpu_seconds(small)  # warm up imports and regex caches
    # The least of three runs each: on a loaded machine one run can be slowed (a collection, another
    # process's cache traffic) by more than the margin between linear (4x) and quadratic (16x) growth.
    growth = min(_cpu_seconds(large) for _ in range(3)) / max(
        min(_cpu_seconds(small) for _ in range(3)), 1e-3
    )
    assert growth < MAX_GROWTH, f"4x the devices took {growth:.1f}x the CPU time"


def test_check_topology_from_a_bundle_with_a_large_lspci_is_fast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "node1").mkdir(parents=True)
    (bundle / "node1" / "lspci-vvv.txt").write_text(_lspci(400))
    meta = {"node": "node1", "collected_at": "2026-01-01T00:00:00Z",
            "sections": {"lspci-vvv": {"argv": ["lspci", "-vvv"], "status": "ok", "exit_status": 0}}}  # fmt: skip
    (bundle / "node1" / META).write_text(json.dumps(meta))
    inventory = tmp_path / "inv.yml"
    inventory.write_text("cluster: {name: c}\nnodes:\n  - {name: node1, address: 10.0.0.1, role: primary}\n")
    start = time.process_time()
    assert main(["check", "topology", "-i", str(inventory), "--from", str(bundle), "--json"]) in (0, 1)
    assert time.process_time() - start < 20.0  # over 30 s with the quadratic rule
    assert strict_loads(capsys.readouterr().out)["nodes"]["node1"]["findings"] == []


def test_a_bundle_section_over_the_cap_is_refused_without_reading_it(tmp_path: Path) -> None:
    node = tmp_path / "node1"
    node.mkdir()
    (node / META).write_text(
        '{"node": "node1", "collected_at": "2026-01-01T00:00:00Z", '
        '"sections": {"lspci": {"argv": ["lspci"], "status": "ok", "exit_status": 0}}}'
    )
    with (node / "lspci.txt").open("wb") as fh:  # sparse: 300 MB on paper, nothing on disk
        fh.truncate(300 << 20)
    start = time.process_time()
    with pytest.raises(InputError, match="larger than the limit"):
        read_bundle(tmp_path)
    assert time.process_time() - start < 5.0
    assert MAX_OUTPUT_BYTES < 300 << 20
