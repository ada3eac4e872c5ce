"""Strict JSON for the tests of ``--json`` output (issue 26): NaN, Infinity and -Infinity are not JSON.

Python's ``json.loads`` accepts them, so a test that parsed ``report --json`` with it could not see that
the report printed ``NaN``. Every test of a ``--json`` output parses with :func:`strict_loads`.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn


def _refuse(constant: str) -> NoReturn:
    raise AssertionError(f"{constant} in a --json output: not JSON (RFC 8259)")


def strict_loads(text: str) -> Any:
    """``text`` parsed as RFC 8259 JSON; NaN, Infinity and -Infinity fail the test."""
    return json.loads(text, parse_constant=_refuse)


def report_rows(text: str) -> list[dict[str, Any]]:
    """The rows of a ``report --json`` / ``sweep --json`` document, after checking its schema."""
    document = strict_loads(text)
    assert document["schema"] == "clusterctl.report/1", document.get("schema")
    rows: list[dict[str, Any]] = document["rows"]
    return rows
