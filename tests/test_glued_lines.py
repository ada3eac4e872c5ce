"""Rank 0's lines read wherever the launcher put them (issue 36): mpirun ``--tag-output`` forwards a rank's
line and its newline as separate pieces, so the next rank's tagged line can land on the end of an
unterminated one (``[1,1]<stdout>:CLUSTERCTL_BREAKDOWN {...}[1,0]<stdout>:CLUSTERCTL_RESULT {...}``), or
cut a line in two; ``srun --label`` writes ``N: `` before each line instead.

Every workload's metrics and every marker reader (result, breakdown, peak, loader, trace, NCCL log) are
fed real captured outputs rearranged into those forms and must read what they read from the plain form.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import pytest

from clusterctl.diagnostics.model import marker_values, rank_lines, untangled
from clusterctl.payload.emit import emit_line
from clusterctl.payload.tracing import trace_lines
from clusterctl.results.nccl_log_proof import prove_fabric
from clusterctl.results.traces import split_traces
from clusterctl.workloads import NAMES, get_workload
from clusterctl.workloads.breakdown import parse_breakdown
from clusterctl.workloads.compute import parse_peak_lines
from clusterctl.workloads.resnet50 import loader_rates_by_node, parse_result_line

FIXTURES = Path(__file__).parent / "fixtures"
Lines = list[tuple[int, str]]
_TAG = re.compile(r"\[1,(\d+)\]<stdout>:")


def _tagged(path: Path) -> Lines:
    """A real ``mpirun --tag-output`` log as (rank, text) per line; a newline's own piece at a line's end
    (``...text[1,0]<stdout>:``, as mpirun wrote it) dropped."""
    lines = []
    for raw in path.read_text().splitlines():
        tag = _TAG.match(raw)
        assert tag, raw
        lines.append((int(tag.group(1)), _TAG.sub("", raw[tag.end() :])))
    return lines


def _rank0(path: Path) -> Lines:
    """An untagged real capture (rank 0's output; the fixture's two header lines dropped) as rank 0's lines."""
    return [(0, line) for line in path.read_text().splitlines()[2:]]


# Real 2-rank payload runs (tests/fixtures/explain/scaling/README.md, tests/fixtures/breakdown/README.md).
RESNET50 = _tagged(FIXTURES / "explain/scaling/20261126T003332Z_resnet50_2n/output.log")
ALLREDUCE = _tagged(FIXTURES / "explain/scaling/20261126T003048Z_allreduce_2n/output.log")
GPT = _tagged(FIXTURES / "breakdown/gpt-fsdp-2ranks.log")
LOADER = _tagged(FIXTURES / "realdata/epochs-1rank.log")
# Rank 1's breakdown line of the ResNet-50 run: the other rank's unterminated line where a log has none.
RANK1 = next(
    (rank, text) for rank, text in RESNET50 if rank == 1 and text.startswith("CLUSTERCTL_BREAKDOWN ")
)


def _mpirun(lines: Lines) -> str:
    return "".join(f"[1,{rank}]<stdout>:{text}\n" for rank, text in lines)


def _glued(lines: Lines, marker: str) -> str:
    """``lines`` as mpirun writes them, but the last rank-0 line holding ``marker`` written on the end of
    another rank's line whose newline mpirun forwards after it (that rank's last line, or ``RANK1``)."""
    at = max(i for i, (rank, text) in enumerate(lines) if rank == 0 and marker in text)
    others = [i for i, (rank, _) in enumerate(lines) if rank != 0 and i < at]
    other = lines[others[-1]] if others else RANK1
    rest = [line for i, line in enumerate(lines) if i not in others[-1:] and i != at]
    before = at - len(others[-1:])
    head, tail = rest[:before], rest[before:]
    glued = f"[1,{other[0]}]<stdout>:{other[1]}[1,0]<stdout>:{lines[at][1]}\n[1,{other[0]}]<stdout>:\n"
    return _mpirun(head) + glued + _mpirun(tail)


def _srun(lines: Lines) -> str:
    """``lines`` as ``srun --label`` writes them (the task number, right-aligned, then ``: ``)."""
    return "".join(f"{rank}: {text}\n" for rank, text in lines)


def _srun_glued(lines: Lines, marker: str) -> str:
    """The srun form, but the last rank-0 line holding ``marker`` right after ``RANK1``'s, on one line."""
    at = max(i for i, (rank, text) in enumerate(lines) if rank == 0 and marker in text)
    glued = f"{RANK1[0]}: {RANK1[1]}{lines[at][0]}: {lines[at][1]}\n"
    return _srun(lines[:at]) + glued + _srun(lines[at + 1 :])


# workload, its log's lines, what rank 0's result line holds, the metric read from it
WORKLOADS = [
    ("resnet50", RESNET50, "CLUSTERCTL_RESULT ", "total_images_per_sec"),
    ("gpt", GPT, "CLUSTERCTL_RESULT ", "total_tokens_per_sec"),
    ("allreduce", ALLREDUCE, "# Avg bus bandwidth", "avg_bus_bandwidth"),
    (
        "nccl-tests",
        _rank0(FIXTURES / "nccl_tests/oci-bm-gpu4-8-2node-16xa100-g8-all_reduce_perf-10G.txt"),
        "# Avg bus bandwidth",
        "avg_bus_bandwidth",
    ),
    (
        "tf_cnn_benchmarks",
        _rank0(FIXTURES / "tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt"),
        "total images/sec",
        "total_images_per_sec",
    ),
]


def test_every_registered_workload_is_covered() -> None:
    assert sorted(NAMES) == sorted(name for name, *_ in WORKLOADS)


@pytest.mark.parametrize("form", ["mpirun-glued", "srun-label"])
@pytest.mark.parametrize(("name", "lines", "marker", "metric"), WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_every_workload_reads_rank_0_s_result_glued_or_labelled(
    name: str, lines: Lines, marker: str, metric: str, form: str
) -> None:
    workload = get_workload(name)
    plain = workload.metrics(_mpirun(lines))
    assert metric in plain, plain
    log = _glued(lines, marker) if form == "mpirun-glued" else _srun(lines)
    assert workload.metrics(log) == plain


def test_the_glued_form_of_the_issue_is_read_as_rank_0_s_result() -> None:
    result = json.dumps({"total_images_per_sec": 12.5, "world_size": 2})
    log = f'[1,1]<stdout>:CLUSTERCTL_BREAKDOWN {{"rank": 1}}[1,0]<stdout>:CLUSTERCTL_RESULT {result}\n'
    assert parse_result_line(log) == {"total_images_per_sec": 12.5, "world_size": 2}
    # rank 1's own result-looking line is never taken for rank 0's
    assert parse_result_line(f"[1,0]<stdout>:x[1,1]<stdout>:CLUSTERCTL_RESULT {result}\n") is None


@pytest.mark.parametrize("form", ["mpirun-glued", "srun-label", "srun-glued"])
def test_every_marker_reader_reads_the_glued_and_labelled_forms(form: str) -> None:
    def shape(lines: Lines, marker: str) -> str:
        return {"mpirun-glued": _glued, "srun-glued": _srun_glued}.get(form, lambda x, _: _srun(x))(
            lines, marker
        )

    plain = _mpirun(RESNET50)
    assert parse_result_line(plain) is not None
    assert parse_result_line(shape(RESNET50, "CLUSTERCTL_RESULT ")) == parse_result_line(plain)
    # rank 0's breakdown glued on the end of rank 1's: both ranks read
    assert parse_breakdown(shape(RESNET50, "CLUSTERCTL_BREAKDOWN ")) == parse_breakdown(plain)
    assert [b.rank for b in parse_breakdown(plain)] == [0, 1]
    # rank 0's peak glued on the end of rank 1's
    peak = parse_peak_lines(shape(RESNET50, "clusterctl-peak "))
    assert peak == parse_peak_lines(plain) and peak is not None and peak.ranks == 2
    loader = loader_rates_by_node(shape(LOADER, "CLUSTERCTL_LOADER "))
    assert loader == loader_rates_by_node(_mpirun(LOADER)) and loader


def test_a_trace_part_glued_on_another_rank_s_line_is_kept() -> None:
    data = json.dumps({"traceEvents": [{"name": "step", "ph": "X", "ts": 0, "dur": 5}]}).encode()
    [part] = trace_lines("rank0.json", data)
    lines = [*RESNET50, (0, part)]
    for log in (_glued(lines, "CLUSTERCTL_TRACE "), _srun(lines)):
        _, files, problems = split_traces(log)
        assert files == {"rank0.json": data}, problems


def test_a_line_mpirun_cut_into_pieces_is_read_whole_per_rank() -> None:
    # rank 0's result line cut after 40 characters, rank 1's breakdown forwarded between its pieces
    result = next(text for rank, text in RESNET50 if text.startswith("CLUSTERCTL_RESULT "))
    log = f"[1,0]<stdout>:{result[:40]}[1,1]<stdout>:{RANK1[1]}\n[1,0]<stdout>:{result[40:]}\n"
    assert parse_result_line(log) == parse_result_line(f"[1,0]<stdout>:{result}\n") is not None
    assert [b.rank for b in parse_breakdown(log)] == [1]
    assert rank_lines(log) == [(0, result), (1, RANK1[1])]
    assert untangled(log) == f"[1,0]<stdout>:{result}\n[1,1]<stdout>:{RANK1[1]}\n"


def test_marker_values_skip_what_does_not_decode_and_keep_each_rank() -> None:
    mpirun = "[1,1]<stdout>:CLUSTERCTL_X {cut[1,0]<stdout>:CLUSTERCTL_X [1, 2]\nmpirun: CLUSTERCTL_X 7\n"
    assert marker_values(mpirun, "CLUSTERCTL_X ") == [(None, 7), (0, [1, 2])]
    srun = ' 3: CLUSTERCTL_X {}\n12: CLUSTERCTL_X {"a": 1} CLUSTERCTL_X nope\n'
    assert marker_values(srun, "CLUSTERCTL_X ") == [(3, {}), (12, {"a": 1})]


@pytest.mark.parametrize("form", ["mpirun-glued", "srun-label"])
def test_nccl_lines_glued_after_another_rank_s_line_prove_the_same_fabric(form: str) -> None:
    # Real NCCL INFO channel lines of a multi-node A100 run; the last glued after rank 1's line.
    lines = _rank0(FIXTURES / "nccl_logs/nccl-issue707-a100-channels-net-ib-gdrdma-partial.txt")
    plain = prove_fabric(_mpirun(lines), fabric_kind="infiniband", gpu=True, nodes=2)
    assert plain.transport is not None and plain.transport.startswith("NET/IB")
    log = _glued(lines, "NCCL INFO Channel") if form == "mpirun-glued" else _srun(lines)
    assert prove_fabric(log, fabric_kind="infiniband", gpu=True, nodes=2) == plain


def test_the_payload_writes_a_marker_line_and_its_newline_in_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()
    stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w")), write_through=False)
    monkeypatch.setattr(sys, "stdout", stdout)
    writes: list[bytes] = []
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    print("Step 2/2: 146.1 tokens/s total")  # still in the buffer: it must reach the pipe first
    emit_line('CLUSTERCTL_RESULT {"world_size": 2}')
    assert writes == [b'CLUSTERCTL_RESULT {"world_size": 2}\n']
    assert os.read(read_end, 1000) == b'Step 2/2: 146.1 tokens/s total\nCLUSTERCTL_RESULT {"world_size": 2}\n'
    stdout.close()
    os.close(read_end)
