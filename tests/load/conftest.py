"""The load suite (marker ``load``) runs only when asked for: ``pytest -m load tests/load`` or
``python bench/load_cycles.py``. It brings up an 8-node sandbox and cycles it three times, far past
CI's time on 2 cores, so a plain ``pytest`` run skips it, saying how to run it."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this directory's tests ``load``; skip them unless the marker expression selects load."""
    selected = "load" in (config.option.markexpr or "") and "not load" not in config.option.markexpr
    skip = pytest.mark.skip(reason="the load suite runs only with -m load (see README, Reliability)")
    for item in items:
        if "load" in item.path.parts:
            item.add_marker(pytest.mark.load)
            if not selected:
                item.add_marker(skip)
