"""The base of every parsed diagnostic, and the line helpers all parsers share.

Parsers are pure: ``str`` in, a model out. They never raise on odd input; what they could not read
goes into ``unparsed_lines`` so a person can see what was skipped.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

# Open MPI `--tag-output` writes `[jobid,rank]<stdout>:`; horovodrun writes `[rank]<stdout>:`.
_TAG = re.compile(r"^\[(?:\d+,)?(\d+)\]<(?:stdout|stderr)>:\s?")
# `srun --label` writes the task number, right-aligned to the widest one, then `: `.
_SRUN_LABEL = re.compile(r"^ *(\d+): ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A tag that is not at the start of its line: mpirun's output forwarding sometimes writes the next
# line's tag (and that line) before the previous line's newline.
_MID_LINE_TAG = re.compile(r"(?<=[^\n])(?=\[(?:\d+,)?\d+\]<(?:stdout|stderr)>:)")


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
