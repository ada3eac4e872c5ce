"""Findings: what a check, a rule or a sanity test found, with what to do about it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

Severity = Literal["error", "warning", "info"]
_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


class Finding(BaseModel):
    """One observation: ``code`` is stable (tests and rule files key on it), ``message`` says what was
    seen and where, ``advice`` what to do and what leaving it costs."""

    severity: Severity
    code: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    message: str
    advice: str = ""
    node: str | None = Field(None, description="The node it concerns, when it concerns one.")


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The most severe severity among ``findings``, or None when there are none."""
    severities = [f.severity for f in findings]
    if not severities:
        return None
    return max(severities, key=_RANK.__getitem__)


def exit_code(findings: Iterable[Finding], strict: bool = False) -> int:
    """1 if any error (or, with ``strict``, any warning) was found, else 0."""
    level = worst(findings)
    return 1 if level == "error" or (strict and level == "warning") else 0
