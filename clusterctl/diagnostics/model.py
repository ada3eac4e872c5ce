"""The base of every parsed diagnostic, and the line helpers all parsers share.

Parsers are pure: ``str`` in, a model out. They never raise on odd input; what they could not read
goes into ``unparsed_lines`` so a person can see what was skipped.

Launcher output (mpirun ``--tag-output``, horovodrun, ``srun --label``) is read here once:
``rank_streams`` undoes mpirun's forwarding in pieces, ``rank_lines`` gives each rank's lines, and
``marker_values`` is the one reader of the payload's ``CLUSTERCTL_*`` marker lines (result, breakdown,
peak, loader, trace) for every workload and for ``results.traces``; ``untangled`` hands the same lines,
each after its tag, to a parser that reads tags at line starts (tf_cnn_benchmarks' totals, NCCL's log).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

# Open MPI `--tag-output` writes `[jobid,rank]<stdout>:`; horovodrun writes `[rank]<stdout>:`.
_TAG = re.compile(r"^\[(?:\d+,)?(\d+)\]<(?:stdout|stderr)>:\s?")
# `srun --label` writes the task number, right-aligned to the widest one, then `: `.
_SRUN_LABEL = re.compile(r"^ *(\d+): ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A tag that is not at the start of its line: mpirun's output forwarding sometimes writes the next
# line's tag (and that line) before the previous line's newline.
_MID_LINE_TAG = re.compile(r"(?<=[^\n])(?=\[(?:\d+,)?\d+\]<(?:stdout|stderr)>:)")
# mpirun --tag-output tags each piece of a rank's output it forwards, wherever the piece begins: at a
# line's start, or inside a line another rank's piece was cut off in (its newline comes later, after
# its own tag again).
PIECE_TAG = re.compile(r"(\[(?:\d{1,6},)?\d{1,6}\]<std(?:out|err)>:)")
# An srun label directly before a marker inside a line (``...}  0: CLUSTERCTL_RESULT {...}``).
_LABEL_BEFORE = re.compile(r"(?:^|(?<=[^\w.]))\s*(\d{1,6}): $")


class Parsed(BaseModel):
    """Fields every parse result has."""

    unparsed_lines: list[str] = Field(
        default_factory=list, description="Non-blank lines the parser did not recognise, verbatim."
    )


def split_tag(line: str) -> tuple[int | None, str]:
    """Split an MPI/horovodrun/srun rank tag off ``line``: ``(rank, rest)``, rank None when untagged."""
    match = _TAG.match(line) or _SRUN_LABEL.match(line)
    if match is None:
        return None, line
    return to_int(match.group(1)), line[match.end() :]


def tagged_lines(text: str) -> list[str]:
    """``text``'s lines, a line that mpirun glued onto the previous one (``...CPU[1,1]<stdout>:#  Rank
    1 ...``) split off at its tag, so each rank's line is seen once."""
    return _MID_LINE_TAG.sub("\n", text).splitlines()


def rank_streams(text: str) -> list[tuple[str, str]]:
    """``text`` as each rank wrote it: ``(tag, stream)``, mpirun's tagged pieces joined per tag in order
    (a line cut into pieces, another rank's piece between them, whole again); the untagged text first
    with the tag ``""``. Output without mpirun's tags (srun labels whole lines) is one untagged stream.

    mpirun tags every line a piece holds, so a piece's text after its first newline, up to the next tag,
    is not the rank's (mpirun's own messages, stderr appended after stdout): it goes to the untagged
    stream.
    """
    pieces = PIECE_TAG.split(text)
    streams: dict[str, list[str]] = {"": [pieces[0]]}
    for tag, data in zip(pieces[1::2], pieces[2::2], strict=True):
        line, newline, rest = data.partition("\n")
        streams.setdefault(tag, []).append(line + newline)
        if rest:
            streams[""].append(rest)
    return [(tag, "".join(parts)) for tag, parts in streams.items()]


def rank_lines(text: str) -> list[tuple[int | None, str]]:
    """Launcher output ``text``, line by line as each rank wrote it: ``(rank, line without its tag)``.

    mpirun's pieces are joined per rank first (``rank_streams``); a line in the untagged stream keeps
    whatever tag it starts with (an srun label ``  3: ``, horovodrun's ``[3]<stdout>:``), rank None when
    it has none. Ranks' lines are grouped by rank; each rank's lines stay in their order.
    """
    lines: list[tuple[int | None, str]] = []
    for tag, stream in rank_streams(text):
        rank = split_tag(tag)[0] if tag else None
        for line in stream.splitlines():
            lines.append(split_tag(line) if rank is None else (rank, line))
    return lines


def untangled(text: str) -> str:
    """Launcher output ``text`` with every rank's lines whole and each on a line of its own after its
    rank's tag (``rank_streams``; grouped by rank, each rank's in order), for a parser that reads the
    tag at a line's start (``split_tag``). Untagged and srun-labelled lines stay as they are."""
    return "".join(f"{tag}{line}\n" for tag, stream in rank_streams(text) for line in stream.splitlines())


def marker_values(text: str, prefix: str) -> list[tuple[int | None, Any]]:
    """Every JSON value the payload printed after ``prefix`` (``CLUSTERCTL_RESULT ``...) in launcher
    output ``text``, in each rank's order: ``(rank of its tag or None, value)``.

    The one reader of marker lines: the marker may sit anywhere in a line (mpirun glued it after another
    rank's unterminated line, or srun's ``N: `` label is glued before it); the JSON value is read from
    the marker on and anything after it is ignored. A marker whose JSON does not decode is skipped.
    """
    decoder = json.JSONDecoder()
    found: list[tuple[int | None, Any]] = []
    for rank, line in rank_lines(text):
        start = line.find(prefix)
        while start >= 0:
            begin = start + len(prefix)
            label = _LABEL_BEFORE.search(line, 0, start) if start else None
            try:
                value, end = decoder.raw_decode(line, begin)
            except json.JSONDecodeError:
                end = begin
            else:
                found.append((to_int(label.group(1)) if label else rank, value))
            start = line.find(prefix, end)
    return found


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour/underline escape sequences (some tools print them)."""
    return _ANSI.sub("", text)


def to_float(text: str) -> float | None:
    """``text`` as a float, or None for N/A, blanks and anything else that is not a number."""
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


def to_int(text: str) -> int | None:
    """``text`` as an int (decimal or 0x hex), or None when it is not one."""
    value = text.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None
