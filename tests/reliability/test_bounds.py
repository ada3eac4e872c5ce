"""Numbers that were unbounded: options, inventory fields and the report's figure (issue 26, item 11).

``--timeout nan|inf|1e309`` was accepted (click's range check passes NaN, and 1e309 reads as inf),
``--ranks-per-node`` had no upper bound on CPU nodes, ``run.steps``, ``display_every`` and
``rate_gbps`` none at all, and ``report --plot`` drew one panel per configuration (300: 25 s, 1 GB).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.results.plot import MAX_PANELS, plot_report
from clusterctl.results.report import build_report
from tests.helpers.hostile import BASE, assert_one_paragraph_refusal, validate
from tests.helpers.records import SOCKET, cpu_config, record

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = str(ROOT / "inventories" / "sandbox-example.yml")
PAPER = str(ROOT / "inventories" / "paper-c4140.yml")


@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-inf", "1e9"])
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "resnet50", "-i", SANDBOX, "--dry-run"],
        ["sweep", "resnet50", "-i", SANDBOX, "--dry-run"],
        ["up", "-i", SANDBOX, "--dry-run"],
        ["check", "topology", "-i", SANDBOX, "--from", "nowhere"],
        ["check", "health", "-i", SANDBOX, "--from", "nowhere"],
    ],
    ids=["run", "sweep", "up", "check", "health"],
)
def test_a_timeout_that_is_no_number_of_seconds_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], value: str
) -> None:
    assert main([*argv, "--timeout", value]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--timeout" in err and ("a week" in err or "range" in err), err


def test_ranks_per_node_is_bounded_on_cpu_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "resnet50", "-i", SANDBOX, "--dry-run", "--ranks-per-node", "100000"]) == 2
    assert "--ranks-per-node" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  batch_size: 64\n", "  batch_size: 64\n  steps: 1000000000\n", "run.steps"),
        ("  batch_size: 64\n", "  batch_size: 64\n  warmup_steps: 1000000000\n", "run.warmup_steps"),
        ("  batch_size: 64\n", "  batch_size: 64\n  display_every: 1000000000\n", "run.display_every"),
        ("      rate_gbps: 100\n", "      rate_gbps: 1000000\n", "rate_gbps"),
    ],
)
def test_unbounded_inventory_numbers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str
) -> None:
    assert old in BASE
    path = tmp_path / "inv.yml"
    path.write_text(BASE.replace(old, new))
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=10.0)
    assert field in outcome.err


def test_the_plot_draws_a_bounded_number_of_panels(tmp_path: Path) -> None:
    rows = build_report(
        [
            record(f"r{batch}", 1, float(batch), config=cpu_config(batch), fabric=SOCKET)
            for batch in range(1, 2 * MAX_PANELS + 1)
        ],
        [],
    )
    assert len(rows) == 2 * MAX_PANELS
    path = plot_report(rows, tmp_path / "scaling.png")
    width = struct.unpack(">I", path.read_bytes()[16:20])[0]  # the PNG's IHDR width
    assert width <= MAX_PANELS * 6 * 120  # 6 inches a panel at 120 dpi
