"""nccl-tests (all_reduce_perf and friends) output: the result table and its summary lines.

Handles the current format (``redop root ... #wrong``), the older one (``redop ... error``) and the
NCCL 1.x one (``bytes N type op ... res``); NCCL INFO lines interleaved in the table are skipped. Rows
pasted without their header are read by their cell count (13: the current format, 12: the older one).

A binary built without MPI and started N times (mpirun, srun) runs N one-rank jobs: each prints the whole
table, so one message size appears N times, and its busbw is 0 (an all-reduce, all-gather or
reduce-scatter over one rank moves no byte: busbw = algbw x 2(n-1)/n or (n-1)/n). ``repeated_rows`` and
``single_rank_rows`` keep those signs, and ``single_rank_processes`` the processes whose NCCL INFO lines
say ``nranks 1``, for a copy without the repeated headers ``jobs`` counts.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, split_tag, tagged_lines, to_float, to_int

_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_VERSION = re.compile(r"NCCL(?: Tests compiled with NCCL| version)\s+v?([\d.]+(?:\+\S+)?)")
_RANK = re.compile(r"^#\s*Rank\s+\d+\s")
_RANK_ZERO = re.compile(r"^#\s*Rank\s+0\s")
_JOB_HEADER = re.compile(r"^#?\s*nThread\s+\d+\s+nGpus\b")
_FAILURE = re.compile(r"(?:NCCL failure|Test failure|NCCL error|CUDA failure)")
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN)\b")
# NCCL's init line of a communicator of one rank, and the process (`host:pid`) that printed it; two
# patterns, each searched once, so a long hostile line costs linear time.
_ONE_RANK = re.compile(r"\brank 0 nranks 1\b")
_PROCESS = re.compile(r"^\s*([^\s:\[\]]{1,255}:\d{1,10}):\d{1,10}\s")
# The table's legend and units lines, which some copies print without their leading '#'.
_LEGEND = re.compile(r"^(?:out-of-place\b|\(B\))")
# Header names of the table per format, mapped to our field names; the second occurrence of the
# timing columns is the in-place half.
_NAMES = {"size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type",
          "redop": "redop", "op": "redop", "root": "root", "time": "time_us", "algbw": "algbw",
          "busbw": "busbw", "error": "error", "#wrong": "error", "wrong": "error", "res": "error"}  # fmt: skip
# The columns of a row pasted without its header, by cell count: the current format, then the older one.
_HEADERLESS = {
    13: "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    12: "size count type redop time algbw busbw error time algbw busbw error",
}


class NcclRow(BaseModel):
    """One message size: out-of-place timings, and in-place ones prefixed ``in_place_``."""

    size: int = Field(description="Message size in bytes.")
    count: int | None = None
    type: str | None = None
    redop: str | None = None
    root: int | None = None
    time_us: float | None = None
    algbw: float | None = Field(None, description="Algorithm bandwidth, GB/s.")
    busbw: float | None = Field(None, description="Bus bandwidth, GB/s.")
    error: str | None = Field(None, description="Error/#wrong column as printed (N/A kept).")
    in_place_time_us: float | None = None
    in_place_algbw: float | None = None
    in_place_busbw: float | None = None
    in_place_error: str | None = None


class NcclTestsOutput(Parsed):
    """What an nccl-tests binary printed."""

    avg_bus_bandwidth_gb_per_s: float | None = Field(None, description="`# Avg bus bandwidth` (GB/s).")
    out_of_bounds: int | None = Field(None, description="`# Out of bounds values` count.")
    out_of_bounds_ok: bool | None = Field(None, description="True for OK, False for FAILED, None if absent.")
    rows: list[NcclRow] = Field(default_factory=list)
    peak_bus_bandwidth_gb_per_s: float | None = Field(None, description="Highest busbw of any row.")
    nccl_version: str | None = None
    ranks: int = Field(0, description="`# Rank N` device lines seen.")
    jobs: int = Field(
        0,
        description="Separate nccl-tests jobs in the text: the most of `# nThread` headers, `Rank 0` lines "
        "and `# Avg bus bandwidth` lines (one job prints each once; a binary built without MPI under mpirun "
        "runs one job per process).",
    )
    errors: list[str] = Field(default_factory=list, description="NCCL/CUDA failure lines.")
    repeated_rows: int = Field(
        0, description="The most times one row (size, type, redop, root) appears: 1 in one job's table."
    )
    single_rank_rows: int = Field(
        0, description="Rows with an algbw above 0 and a busbw of 0, out of place and in place: one rank's."
    )
    single_rank_processes: int = Field(
        0, description="Processes (host:pid) whose NCCL INFO init line says `rank 0 nranks 1`."
    )


def parse_nccl_tests(text: str) -> NcclTestsOutput:
    """Parse nccl-tests stdout (optionally rank-tagged).

    Args:
        text: The output, as printed.

    Returns:
        Rows, averages and failures; ``unparsed_lines`` lists what was not recognised.
    """
    result = NcclTestsOutput()
    columns: list[str] = []
    headers = rank_zeros = summaries = 0
    one_rank: set[str] = set()
    for raw in tagged_lines(text):  # mpirun --tag-output sometimes glues the next line onto a line
        _, line = split_tag(raw)
        stripped = line.strip()
        if not stripped:
            continue
        headers += bool(_JOB_HEADER.match(stripped))
        rank_zeros += bool(_RANK_ZERO.match(stripped))
        if m := _AVG.match(stripped):
            summaries += 1
            result.avg_bus_bandwidth_gb_per_s = to_float(m.group(1))
        elif m := _OOB.match(stripped):
            result.out_of_bounds = to_int(m.group(1))
            result.out_of_bounds_ok = None if m.group(2) is None else m.group(2) == "OK"
        elif _is_header(stripped):
            columns = _columns(stripped)
        elif _FAILURE.search(stripped):
            result.errors.append(stripped)
        elif m := _VERSION.search(stripped):
            result.nccl_version = m.group(1)
        elif _RANK.match(stripped):
            result.ranks += 1
        elif stripped.startswith(("#", "nThread")) or _NCCL_LOG.search(stripped) or _LEGEND.match(stripped):
            if (
                "NCCL INFO" in stripped
                and _ONE_RANK.search(stripped)
                and (process := _PROCESS.match(stripped))
            ):
                one_rank.add(process.group(1))
        elif (row := _row(stripped.split(), columns)) is not None:
            result.rows.append(row)
        else:
            result.unparsed_lines.append(raw)
    result.jobs = max(headers, rank_zeros, summaries)
    seen = Counter((row.size, row.type, row.redop, row.root) for row in result.rows)
    result.repeated_rows = max(seen.values(), default=0)
    result.single_rank_rows = sum(_one_rank_row(row) for row in result.rows)
    result.single_rank_processes = len(one_rank)
    busbws = [bw for row in result.rows for bw in (row.busbw, row.in_place_busbw) if bw is not None]
    result.peak_bus_bandwidth_gb_per_s = max(busbws, default=None)
    return result


def _is_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return bool(words) and words[0] in ("size", "bytes") and "time" in words


def _columns(line: str) -> list[str]:
    names: list[str] = []
    for word in line.lstrip("#").split():
        name = _NAMES.get(word.lower(), word.lower())
        names.append(f"in_place_{name}" if name in names else name)
    return names


def _one_rank_row(row: NcclRow) -> bool:
    """A row a one-rank job prints: data moved (algbw above 0) but no bus bandwidth, both halves."""
    halves = ((row.algbw, row.busbw), (row.in_place_algbw, row.in_place_busbw))
    return all(algbw is not None and algbw > 0 and busbw == 0 for algbw, busbw in halves)


def _row(cells: list[str], columns: list[str]) -> NcclRow | None:
    """A table row, or None when the cells do not fit the header (or, headerless, no known format)."""
    if not columns and len(cells) in _HEADERLESS and to_float(cells[6]) is not None:
        columns = _columns(_HEADERLESS[len(cells)])
    if not columns or len(cells) != len(columns) or to_int(cells[0]) is None:
        return None
    values = dict(zip(columns, cells, strict=True))
    return NcclRow(
        size=to_int(values["size"]) or 0,
        count=to_int(values.get("count", "")),
        type=values.get("type"),
        redop=values.get("redop"),
        root=to_int(values.get("root", "")),
        time_us=to_float(values.get("time_us", "")),
        algbw=to_float(values.get("algbw", "")),
        busbw=to_float(values.get("busbw", "")),
        error=values.get("error"),
        in_place_time_us=to_float(values.get("in_place_time_us", "")),
        in_place_algbw=to_float(values.get("in_place_algbw", "")),
        in_place_busbw=to_float(values.get("in_place_busbw", "")),
        in_place_error=values.get("in_place_error"),
    )
