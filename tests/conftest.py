"""Hooks for every test: the session's guard (tests/helpers/session_guard.py: SIGTERM and SIGHUP tear down as
Ctrl-C does; sandboxes a killed run left are removed at the start), and the order of a session that
mixes unit and integration tests."""

from __future__ import annotations

import pytest

from tests.helpers.session_guard import pytest_configure
from tests.helpers.suite import SESSION_SANDBOX_FIXTURES, beside_on_the_session_sandbox

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a session that holds both, the unit tests first, then the integration tests (each group in file
    order, a module's tests together). scripts/test.sh's second session is one: its ``beside`` tests then
    start once the integration session beside it has built the image they use, and they do not load the
    machine while that session's sandbox comes up. A ``beside`` test on the session sandbox is refused."""
    misplaced = beside_on_the_session_sandbox(items)
    if misplaced:
        raise pytest.UsageError(
            f"{', '.join(misplaced)}: marked beside but uses the session sandbox "
            f"({', '.join(sorted(SESSION_SANDBOX_FIXTURES))}). Fix: drop the beside mark (the test then runs "
            "in the first session, with the other tests of that sandbox), or give it a sandbox of its own."
        )
    items.sort(key=lambda item: item.get_closest_marker("integration") is not None)
