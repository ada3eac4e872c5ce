"""Inspect saved outputs: read a file's text, detect its kind, parse it, apply the rules.

A file of a topology bundle (``<node>/<key>.txt`` beside a ``meta.json``) takes its collector's kind,
as `check topology` parsed it, so an empty or garbled output is still read by the right parser.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from clusterctl.diagnostics import LOG_KINDS, detect_kinds, parse
from clusterctl.diagnostics.bundle import MAX_OUTPUT_BYTES, META, NodeMeta
from clusterctl.diagnostics.collectors import COLLECTOR_BY_KEY
from clusterctl.diagnostics.rules import Expectation, apply_rules
from clusterctl.findings import Finding
from clusterctl.readfile import read_capped


class Inspection(BaseModel):
    """One file's result; ``model_dump()`` is one element of `inspect --json`."""

    file: str
    kind: str | None
    parsed: dict = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    unparsed_lines: list[str] = Field(default_factory=list)
    also_read_as: list[str] = Field(
        default_factory=list,
        description="Log kinds (NCCL, MPI errors) also found in the text and judged too: a job log that "
        "begins with another tool's output still carries them.",
    )


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
    """Detect (unless given), parse and judge one output.

    Detected, a text is parsed as its first kind and judged also as every log kind (``LOG_KINDS``)
    found in it: an ``nvidia-smi`` banner at the top of a job log does not hide its NCCL errors.
    """
    found = [] if kind else detect_kinds(text)
    kind = kind or next(iter(found), None)
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
    also = [k for k in found if k in LOG_KINDS and k != kind]
    findings = apply_rules(kind, parsed, expect)
    for log_kind in also:
        findings += [f for f in apply_rules(log_kind, parse(log_kind, text), expect) if f not in findings]
    return Inspection(
        file=name, kind=kind, parsed=dumped, findings=findings, unparsed_lines=unparsed, also_read_as=also
    )


def bundle_kind(path: Path) -> str | None:
    """The kind of a bundle file: its collector's when ``path`` is ``<key>.txt`` beside a meta.json."""
    collector = COLLECTOR_BY_KEY.get(path.stem)
    if path.suffix != ".txt" or collector is None or not (path.parent / META).is_file():
        return None
    return collector.kind


def _bundle_meta(path: Path, text: str) -> Inspection | None:
    """A bundle's meta.json explained (it is no command output), or None when ``text`` is not one."""
    try:
        meta = NodeMeta.model_validate_json(text)
    except ValidationError:
        return None
    finding = Finding(
        severity="info",
        code="bundle-meta",
        message=f"the topology bundle's record of how each command went on {meta.node}, not a command output",
        advice="Judge the whole bundle against the inventory with "
        f"`clusterctl check topology --from {path.absolute().parent.parent}`.",
    )
    return Inspection(file=str(path), kind=None, findings=[finding])


def inspect_file(path: Path, kind: str | None = None, expect: Expectation | None = None) -> Inspection:
    """Read ``path`` and inspect it; a bundle's file takes its collector's kind unless ``kind`` is given.

    Raises:
        InputError: the file cannot be read, is not a regular file, or is over ``MAX_OUTPUT_BYTES``.
    """
    data = read_capped(
        path,
        MAX_OUTPUT_BYTES,
        "pass a saved command output (a regular file); cut a larger log to its relevant part",
    )
    raw = data.decode("utf-8", errors="replace")
    if kind is None and path.name == META and (meta := _bundle_meta(path, raw)):
        return meta
    return inspect_text(str(path), output_text(raw), kind or bundle_kind(path), expect)
