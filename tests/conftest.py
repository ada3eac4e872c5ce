"""Hooks for every test: the session's guard (tests/session_guard.py: SIGTERM and SIGHUP tear down as
Ctrl-C does; sandboxes a killed run left are removed at the start)."""

from tests.session_guard import pytest_configure

__all__ = ["pytest_configure"]
