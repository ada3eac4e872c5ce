"""Traces a run printed (``run --trace``): taken out of its output into the run directory's ``trace/``.
Pure.

The payload (``clusterctl/payload/tracing.py``) prints each trace file as numbered parts, one line
each, after any tag the launcher puts before it (``[1,0]<stdout>:`` from mpirun, ``0: `` from srun):
``CLUSTERCTL_TRACE {"name": "rank0.json", "part": 0, "parts": 2, "gzip_base64": "..."}``, or one line
with ``"dropped": "<why>"`` for a file over its bound. ``split_traces`` joins and decodes them; what is
kept in ``output.log`` and shown live is one short line per file, at its first part.

mpirun forwards each rank's output in pieces, each after its tag, and a piece may end inside a line:
the next piece's tag (another rank's, maybe) then lands inside that line, and the line's rest comes
later after its own tag. ``split_traces`` therefore reads the traces through
``diagnostics.model.marker_values``, which reads each rank's own stream, the pieces after its tag joined
in order; the console and ``output.log`` drop a trace line's stray rests.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from clusterctl.diagnostics.model import PIECE_TAG, marker_values
from clusterctl.findings import Finding

TRACE_PREFIX = "CLUSTERCTL_TRACE "
TRACE_DIR = "trace"
# The names the payload gives its files: nothing else is written (no path, no other extension).
_NAME = re.compile(r"^(rank\d{1,6}|horovod-timeline)\.json$")
# A decoded trace is at most this large (the payload's own bound is 32 MiB).
MAX_DECODED_BYTES = 64 * 1024 * 1024
MAX_PARTS = 100_000
# The tail of a trace part that mpirun forwarded as a piece of its own (base64, then the JSON's end).
# The start of a trace part as the payload writes it (``clusterctl.payload.tracing``): enough of a part
# that mpirun cut, with the rest on another line after another rank's piece, to show its file.
_HEADER = re.compile(
    r'\{"name": "(?P<name>[\w.-]{1,80})", "part": (?P<part>\d{1,6}), "parts": (?P<parts>\d{1,6})'
)
_FRAGMENT = re.compile(r'^(.*": "[A-Za-z0-9+/=]*"\}|[A-Za-z0-9+/=]{16,}"?\}?)$')


@dataclass
class _Part:
    name: str | None
    index: int = 0
    count: int = 1
    data: str = ""
    dropped: str | None = None
    problem: str | None = None


@dataclass
class _File:
    count: int
    parts: dict[int, str] = field(default_factory=dict)


def _parse(text: str) -> _Part:
    try:
        fields = json.loads(text)
    except ValueError:
        return _Part(None, problem="not a trace line")
    return _part(fields)


def _part(fields: object) -> _Part:
    """One trace line's JSON value as a part (or why it is none)."""
    name = fields.get("name") if isinstance(fields, dict) else None
    if not isinstance(fields, dict) or not isinstance(name, str) or not _NAME.match(name):
        return _Part(None, problem=f"unexpected name {str(name)[:60]!r}")
    if "dropped" in fields:
        return _Part(name, dropped=str(fields["dropped"])[:300])
    index, count, data = fields.get("part", 0), fields.get("parts", 1), fields.get("gzip_base64")
    if not (isinstance(index, int) and isinstance(count, int) and 0 <= index < count <= MAX_PARTS):
        return _Part(name, problem="bad part numbers")
    if not isinstance(data, str):
        return _Part(name, problem="no data")
    return _Part(name, index, count, data)


def shown(line: str) -> str | None:
    """A line as the console and ``output.log`` show it: a trace file's first part as its tag, name and
    size; its other parts and stray pieces left out (None when nothing else is left); a line without
    any of them as it is."""
    if TRACE_PREFIX not in line and not _has_fragment(line):
        return line
    pieces = PIECE_TAG.split(line)
    kept = [_shown_piece("", pieces[0])] + [
        _shown_piece(tag, data) for tag, data in _joined(zip(pieces[1::2], pieces[2::2], strict=True))
    ]
    return "\n".join(piece for piece in kept if piece is not None) or None


def _joined(pieces: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Tagged pieces with each run of one tag's adjacent pieces joined: mpirun tags every piece it
    forwards, so a line it read in two pieces (it reads 4 KiB at a time, and a burst of trace parts
    crosses that) comes out as ``[1,0]<stdout>:CLUSTERCTL_TRACE {...[1,0]<stdout>:...}``."""
    joined: list[tuple[str, str]] = []
    for tag, data in pieces:
        if joined and joined[-1][0] == tag:
            joined[-1] = (tag, joined[-1][1] + data)
        else:
            joined.append((tag, data))
    return joined


def _has_fragment(line: str) -> bool:
    """Whether any tagged piece of ``line`` is a stray piece of a trace part: the first piece, or one
    glued after another rank's cut line (``[1,1]<stdout>:CLUSTER[1,0]<stdout>:<base64>"}``)."""
    return any(_FRAGMENT.match(data) for data in PIECE_TAG.split(line)[2::2])


def _shown_piece(tag: str, data: str) -> str | None:
    at = data.find(TRACE_PREFIX)
    if at < 0:
        return None if _FRAGMENT.match(data) or not (tag or data) else tag + data
    part = _parse(data[at + len(TRACE_PREFIX) :])
    if part.problem == "not a trace line":  # cut: its header says which part it is
        header = _HEADER.match(data, at + len(TRACE_PREFIX))
        if header is None or int(header["part"]):
            return None
        part = _part({"name": header["name"], "part": 0, "parts": int(header["parts"]), "gzip_base64": ""})
    if part.index:  # a later part
        return None
    what = part.dropped or part.problem or f"{part.count} part(s)"
    return f"{tag}{data[:at]}{TRACE_PREFIX}{part.name or '?'}: {what}"


def split_traces(output: str) -> tuple[str, dict[str, bytes], list[str]]:
    """The output as ``shown`` makes it, the trace files by name, and why a file the payload printed
    is not kept (dropped by the payload, an unknown name, parts missing, undecodable, too large)."""
    files: dict[str, _File] = {}
    problems: list[str] = []
    values = marker_values(output, TRACE_PREFIX)
    if (unread := output.count(TRACE_PREFIX) - len(values)) > 0:
        problems.append(f"trace ?: {unread} trace line(s) not readable (cut off or garbled)")
    for _, fields in values:
        part = _part(fields)
        if part.problem or part.dropped:
            problems.append(f"trace {part.name or '?'}: {part.problem or part.dropped}")
        elif part.name is not None:
            files.setdefault(part.name, _File(part.count)).parts[part.index] = part.data
    decoded = {}
    for name, got in files.items():
        if len(got.parts) != got.count:
            problems.append(f"trace {name}: {got.count - len(got.parts)} of its {got.count} parts missing")
            continue
        data, problem = _decode("".join(got.parts[i] for i in range(got.count)))
        if data is None:
            problems.append(f"trace {name}: {problem}")
        else:
            decoded[name] = data
    kept = [line for line in (shown(line) for line in output.split("\n")) if line is not None]
    return "\n".join(kept), decoded, problems


def _decode(packed: str) -> tuple[bytes | None, str | None]:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(base64.b64decode(packed, validate=True))) as unpacked:
            data = unpacked.read(MAX_DECODED_BYTES + 1)
    except (binascii.Error, OSError, EOFError, ValueError) as exc:
        return None, f"undecodable ({exc})"
    if len(data) > MAX_DECODED_BYTES:
        return None, f"over {MAX_DECODED_BYTES} bytes decoded"
    return data, None


def trace_finding(problem: str) -> Finding:
    """A trace the run printed but the run directory does not keep (a warning: the run stands)."""
    return Finding(
        severity="warning",
        code="trace-not-kept",
        message=problem,
        advice="Trace fewer steps or ranks (the payload's MAX_TRACE_BYTES bounds each file); the "
        "measurement is unaffected.",
    )
