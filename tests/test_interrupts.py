"""``clusterctl.interrupts``: a cleanup held against a second Ctrl-C or a SIGTERM, real signals only.

A bench's sandbox left its network behind once its containers were gone: a Ctrl-C (or SIGTERM) that
lands inside the removal cuts it short. ``deferred_interrupts`` holds both signals until the block ends.
"""

from __future__ import annotations

import os
import signal

import pytest

from clusterctl.interrupts import deferred_interrupts, sigterm_interrupts


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_cleanup_is_held_until_it_ends(sig: signal.Signals) -> None:
    steps: list[str] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(KeyboardInterrupt, match="held until the cleanup ended"), deferred_interrupts():
        steps.append("containers")
        os.kill(os.getpid(), sig)  # delivered to this (main) thread before kill returns
        steps.append("network")
    assert steps == ["containers", "network"]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_quiet_cleanup_raises_nothing() -> None:
    with deferred_interrupts():
        done = True
    assert done


def test_sigterm_becomes_keyboard_interrupt_inside_only() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("SIGTERM did not interrupt")
    assert signal.getsignal(signal.SIGTERM) is previous
