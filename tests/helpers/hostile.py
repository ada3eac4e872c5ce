"""Shared material of the reliability suite: a valid inventory to mutate, and running `inventory validate`.

Imported by the reliability suite's modules (tests/reliability/).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from clusterctl.cli import main
from tests.helpers import inventories


def reproducible(examples: int) -> settings:
    """Hypothesis settings for CI: ``examples`` inputs, derandomized, no example database, no deadline
    (each test bounds the time of every input itself)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )


# A valid two-node inventory; every generated inventory is a mutation of it (or random YAML).
BASE = (
    inventories.BASE.replace(
        "  defaults:\n    gpus:", "  defaults:\n    ssh:\n      user: root\n      port: 22\n    gpus:", 1
    )
    .replace("    address: 10.0.0.2\n", "    address: gpu02.example.org\n", 1)
    .replace(
        "  sshd_port: 50000\n",
        "  sshd_port: 50000\n  shm_size: 16g\n  cap_add: [IPC_LOCK]\n  devices: [/dev/infiniband]\n",
        1,
    )
    + "run:\n  batch_size: 64\n"
)


@dataclass
class Outcome:
    """What one `clusterctl inventory validate` did."""

    code: int
    out: str
    err: str
    seconds: float


def validate(path: Path, capsys: pytest.CaptureFixture[str]) -> Outcome:
    """Run `clusterctl inventory validate path` in-process; its exit code, output and duration."""
    capsys.readouterr()
    start = time.monotonic()
    code = main(["inventory", "validate", str(path)])
    seconds = time.monotonic() - start
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, seconds)


def assert_one_paragraph_refusal(outcome: Outcome, *, within_s: float) -> None:
    """Exit 2 with an error that is one paragraph (no blank line, no traceback) and has a Fix, in time."""
    assert outcome.code == 2, outcome.err
    assert outcome.err.startswith("error: "), outcome.err
    assert "Traceback" not in outcome.err
    assert "\n\n" not in outcome.err.strip(), outcome.err
    assert "Fix" in outcome.err, outcome.err
    assert outcome.seconds < within_s, f"{outcome.seconds:.1f} s: {outcome.err[:200]}"
