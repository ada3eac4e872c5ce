"""Hooks for every test: the session's guard (tests/session_guard.py: SIGTERM tears down as Ctrl-C
does, sandboxes a killed run left are removed at the start, integration tests share one xdist worker)."""

from tests.session_guard import pytest_collection_modifyitems, pytest_configure

__all__ = ["pytest_collection_modifyitems", "pytest_configure"]
