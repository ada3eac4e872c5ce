"""The split of scripts/test.sh's two sessions, as the root conftest applies it: which ``beside`` tests
ask for the session's sandbox, which only the first session brings up."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

# The session sandbox's fixtures: a `beside` test that asked for one would bring up a second sandbox in
# scripts/test.sh's second session, which the split is there to avoid.
SESSION_SANDBOX_FIXTURES = frozenset({"sandbox2", "cluster"})


def beside_on_the_session_sandbox(items: Sequence[pytest.Item]) -> list[str]:
    """The ``beside`` tests that use the session's sandbox (by their fixtures), by node ID."""
    return [
        item.nodeid
        for item in items
        if item.get_closest_marker("beside") is not None
        and SESSION_SANDBOX_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
