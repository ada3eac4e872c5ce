"""Inspect saved outputs: read a file's text, detect its kind, parse it, apply the rules."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from clusterctl.diagnostics import detect_kind, parse
from clusterctl.diagnostics.rules import Expectation, apply_rules
from clusterctl.errors import InputError
from clusterctl.findings import Finding


class Inspection(BaseModel):
    """One file's result; ``model_dump()`` is one element of `inspect --json`."""

    file: str
    kind: str | None
    parsed: dict = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    unparsed_lines: list[str] = Field(default_factory=list)


def output_text(raw: str) -> str:
    """The command output of a file: a fixture's `# source:`/`# notes:` header lines removed."""
    lines = raw.splitlines(keepends=True)
    if lines and lines[0].startswith("# source:"):
        skip = 2 if len(lines) > 1 and lines[1].startswith("# notes:") else 1
        return "".join(lines[skip:])
    return raw


def inspect_text(
    name: str, text: str, kind: str | None = None, expect: Expectation | None = None
) -> Inspection:
    """Detect (unless given), parse and judge one output."""
    kind = kind or detect_kind(text)
    if kind is None:
        finding = Finding(
            severity="warning",
            code="unknown-kind",
            message=f"{name}: no known command output recognised",
            advice="Pass --kind to say what printed it.",
        )
        return Inspection(file=name, kind=None, findings=[finding])
    parsed = parse(kind, text)
    dumped = parsed.model_dump()
    unparsed = dumped.pop("unparsed_lines", [])
    return Inspection(
        file=name,
        kind=kind,
        parsed=dumped,
        findings=apply_rules(kind, parsed, expect),
        unparsed_lines=unparsed,
    )


def inspect_file(path: Path, kind: str | None = None, expect: Expectation | None = None) -> Inspection:
    """Read ``path`` and inspect it.

    Raises:
        InputError: the file cannot be read.
    """
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}. Fix: pass an existing, readable file."
        ) from exc
    return inspect_text(str(path), output_text(raw), kind, expect)
