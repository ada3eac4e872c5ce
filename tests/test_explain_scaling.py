"""Computation scalability and global efficiency (POP across a configuration's rows), the
compute-scaling rule and the verdict that names it, and the communication-bound rule's bandwidth bounds:
hand numbers for the formulas, and real sandbox runs (tests/fixtures/explain/scaling/README.md) for the
report and `explain`."""

from __future__ import annotations

import math

import pytest

from clusterctl.results.pop import ScalingReference, scaling_of

QUICKSTART = ScalingReference(devices=1, compute_ms=385.0, source="breakdown")


def test_scaling_of_hand_numbers_from_the_quickstart_s_figures() -> None:
    # docs/sandbox.md: 385 ms of compute a step on 1 node, 850 on 2, PE 0.96
    scaling = scaling_of(QUICKSTART, 850.0, 0.96)
    assert scaling is not None and scaling.reference == QUICKSTART
    assert scaling.computation_scalability == pytest.approx(385 / 850)
    assert scaling.global_efficiency == pytest.approx(0.96 * 385 / 850)
    unknown_pe = scaling_of(QUICKSTART, 850.0, None)
    assert unknown_pe is not None and unknown_pe.global_efficiency is None
    assert unknown_pe.computation_scalability == pytest.approx(385 / 850)


@pytest.mark.parametrize("compute", [None, 0.0, -5.0, math.nan, math.inf])
def test_no_scaling_without_a_compute_that_is_a_measurement(compute: float | None) -> None:
    assert scaling_of(QUICKSTART, compute, 0.9) is None


def test_no_scaling_without_a_reference() -> None:
    assert scaling_of(None, 850.0, 0.9) is None
