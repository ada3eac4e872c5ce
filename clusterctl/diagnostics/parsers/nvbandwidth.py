"""`nvbandwidth -t host_to_device_memcpy_ce` (or ``_sm``): host-to-GPU copy bandwidth per GPU.

nvbandwidth prints a header, then for each testcase run a matrix of GB/s (one CPU row, one column
per GPU for the host-to-device cases) and its sum::

    Running host_to_device_memcpy_ce.
    memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
              0         1
    0     25.50     24.26

    SUM host_to_device_memcpy_ce 49.76

Only the host-to-device testcases are read (a full run prints every testcase; the others are skipped,
not unparsed). Shape::

    NvBandwidth(version="v0.2", testcase="host_to_device_memcpy_ce", gpus={0: 25.5, 1: 24.26},
                total=49.76)

A cell of ``N/A`` is left out of ``gpus``; a cell that is no finite number (``nan``, ``inf``, or digits
past a float's range) is left out too, its row kept in ``unparsed_lines``. A header that names no
GPU it could index (a GPU number longer than 4 digits) is not a header.
"""

from __future__ import annotations

import math
import re

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, to_float

_RUNNING = re.compile(r"^Running (?P<case>\w+)\.")
_SUM = re.compile(r"^SUM (?P<case>\w+) (?P<value>[\d.]+)")
# GPU indexes are small: a run of more digits is no index (and int() of thousands of them raises).
_HEADER = re.compile(r"^\s*\d{1,4}(?:\s+\d{1,4})*\s*$")
_ROW = re.compile(r"^\s*(?P<row>\d+)\s+(?P<cells>(?:\S+\s*)+)$")
_VERSION = re.compile(r"^nvbandwidth Version: (?P<v>\S+)")
_H2D = re.compile(r"^host_to_device_memcpy_(?:ce|sm)$")


class NvBandwidth(Parsed):
    """The host-to-device copy bandwidth of each GPU (GB/s) and their sum."""

    version: str | None = None
    testcase: str | None = Field(None, description='e.g. "host_to_device_memcpy_ce".')
    gpus: dict[int, float] = Field(default_factory=dict, description="GPU index to GB/s.")
    total: float | None = Field(None, description="nvbandwidth's SUM line, GB/s.")


def parse_nvbandwidth(text: str) -> NvBandwidth:
    """Parse nvbandwidth output, keeping its first host-to-device testcase. Never raises."""
    result = NvBandwidth()
    case: str | None = None
    columns: list[int] = []
    for line in text.splitlines():
        if match := _VERSION.match(line):
            result.version = match["v"]
        elif match := _RUNNING.match(line):
            case = match["case"] if _H2D.match(match["case"]) and result.testcase is None else None
            if case:
                result.testcase = case
            columns = []
        elif case is None:
            continue
        elif match := _SUM.match(line):
            if (
                match["case"] == case
                and (total := to_float(match["value"])) is not None
                and math.isfinite(total)
            ):
                result.total = total
            case = None
        elif _HEADER.match(line) and not columns:
            columns = [int(c) for c in line.split()]
        elif columns and (match := _ROW.match(line)):
            unreadable = False
            for gpu, cell in zip(columns, match["cells"].split(), strict=False):
                if (value := to_float(cell)) is not None and math.isfinite(value):
                    result.gpus[gpu] = value
                elif cell != "N/A":
                    unreadable = True
            if unreadable:
                result.unparsed_lines.append(line)
        elif line.strip() and not line.startswith("memcpy "):
            result.unparsed_lines.append(line)
    return result
