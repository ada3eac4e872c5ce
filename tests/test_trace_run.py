"""`run --trace` for real: the payload under this host's Open MPI (1 CPU rank, DDP over Gloo) traces 3
steps with torch.profiler; the run directory keeps a Chrome trace that Perfetto opens, and output.log
only its name and size."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from clusterctl.payload.tracing import MAX_TRACE_BYTES, PART_CHARS, trace_lines
from clusterctl.results.traces import TRACE_PREFIX, shown, split_traces
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.resnet50 import TRACE_STEPS
from tests.helpers.localrun import LocalMpirun, local_inventory

TINY = {"image_size": 32, "batch_size": 2, "steps": 2, "warmup_steps": 1, "display_every": 2}


def test_a_traced_ddp_run_keeps_a_chrome_trace_per_rank(tmp_path: Path) -> None:
    inventory = local_inventory()
    options = run_options(inventory, "resnet50", nodes=1, framework="ddp", trace=True, **TINY)
    plan = build_job(inventory, options, get_workload("resnet50"))
    assert f"--trace-steps={TRACE_STEPS}" in plan.rank_argv
    lines: list[str] = []
    [(record, directory)] = run_plans(
        run_context(
            inventory, [plan], launcher=LocalMpirun(), timeout_s=300, runs_dir=tmp_path, on_line=lines.append
        )
    )
    assert record.valid, record.findings
    trace = json.loads((directory / "trace" / "rank0.json").read_text())
    events = trace["traceEvents"]
    assert any(e.get("ph") == "X" and "conv" in e.get("name", "") for e in events)  # the model's own ops
    assert [p.name for p in (directory / "trace").iterdir()] == ["rank0.json"]
    output = (directory / "output.log").read_text()
    (kept,) = [line for line in output.splitlines() if TRACE_PREFIX in line]
    assert "CLUSTERCTL_TRACE rank0.json: " in kept and kept.endswith("part(s)")
    assert [line for line in lines if TRACE_PREFIX in line] == [kept]  # shown short, live too


def test_a_traced_two_rank_horovod_run_keeps_each_ranks_trace_and_the_timeline(tmp_path: Path) -> None:
    """Two ranks print their parts at once: mpirun interleaves and cuts them, each rank's are rejoined."""
    inventory = local_inventory()
    options = run_options(inventory, "resnet50", nodes=2, framework="horovod", trace=True, **TINY)
    plan = build_job(inventory, options, get_workload("resnet50"))
    [(record, directory)] = run_plans(
        run_context(inventory, [plan], launcher=LocalMpirun(), timeout_s=300, runs_dir=tmp_path)
    )
    assert record.valid, record.findings
    names = sorted(p.name for p in (directory / "trace").iterdir())
    assert names == ["horovod-timeline.json", "rank0.json", "rank1.json"]
    for rank in (0, 1):
        events = json.loads((directory / "trace" / f"rank{rank}.json").read_text())["traceEvents"]
        assert any("conv" in e.get("name", "") for e in events)
    timeline = json.loads((directory / "trace" / "horovod-timeline.json").read_text())
    assert any("ALLREDUCE" in str(e.get("name", "")) for e in timeline)  # Horovod's own ops
    output = (directory / "output.log").read_text()
    assert max(len(line) for line in output.splitlines()) < 2000  # no base64 left in it


def test_trace_parts_are_joined_and_bad_or_dropped_ones_say_why() -> None:
    data = json.dumps({"traceEvents": [{"name": f"op{i}", "ph": "X"} for i in range(3000)]}).encode()
    parts = trace_lines("rank0.json", data)
    assert len(parts) > 1 and all(len(line) < PART_CHARS + 200 for line in parts)
    good = base64.b64encode(gzip.compress(b'{"traceEvents": []}')).decode()
    output = "\n".join(
        [
            *("[1,0]<stdout>:" + line for line in parts[:-2]),
            # where mpirun cut rank 0's line: rank 1's piece inside it, and the rest later on its own
            "[1,0]<stdout>:" + parts[-2][:50] + "[1,1]<stdout>:Step 1/2",
            "[1,0]<stdout>:" + parts[-2][50:],
            "[1,0]<stdout>:" + parts[-1][:70] + "[1,0]<stdout>:" + parts[-1][70:],
            "0: " + TRACE_PREFIX + json.dumps({"name": "../etc/passwd", "gzip_base64": good}),
            *trace_lines("rank1.json", b"x" * (MAX_TRACE_BYTES + 1)),
            TRACE_PREFIX + json.dumps({"name": "rank2.json", "part": 0, "parts": 1, "gzip_base64": "no!"}),
            TRACE_PREFIX + json.dumps({"name": "rank3.json", "part": 1, "parts": 2, "gzip_base64": good}),
            "Step 2/2: 3.0 img/s total",
        ]
    )
    kept, files, problems = split_traces(output)
    assert files == {"rank0.json": data}
    assert [p.split(":")[0] for p in problems] == [
        "trace ?",
        "trace rank1.json",
        "trace rank2.json",
        "trace rank3.json",
    ]
    assert "over the bound" in problems[1] and "1 of its 2 parts missing" in problems[3]
    assert kept.splitlines()[0] == f"[1,0]<stdout>:CLUSTERCTL_TRACE rank0.json: {len(parts)} part(s)"
    assert kept.splitlines()[-1] == "Step 2/2: 3.0 img/s total"
    # rank0's and rank3's later parts and stray pieces are not kept; rank 1's line inside one is
    assert len(kept.splitlines()) == 6 and "[1,1]<stdout>:Step 1/2" in kept.splitlines()
    assert shown("plain line") == "plain line" and shown("[1,0]<stdout>:" + parts[1]) is None


def test_trace_of_a_workload_without_one_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusterctl.cli import main

    assert main(["run", "allreduce", "--trace", "-i", "/nonexistent.yml"]) == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "only resnet50" in err and "Traceback" not in err


def test_a_trace_piece_glued_after_another_ranks_cut_line_is_left_out() -> None:
    # Seen in a fresh-clone CI run: mpirun cut rank 1's line after "CLUSTER" and glued the tail of one of
    # rank 0's trace parts after it. The base64 must not reach output.log; rank 1's piece stays.
    tail = "wqMHOiwGYACuxxluiU6ol3+7mvvYZwplMD8GARwe+QaJ+KmYLDlLBHEickbAZAwrblVnHWj2dDE7nY" * 30 + '"}'
    line = f"[1,1]<stdout>:CLUSTER[1,0]<stdout>:{tail}"
    assert shown(line) == "[1,1]<stdout>:CLUSTER"
    assert shown("[1,0]<stdout>:Step 10/20: 3.2 img/s total") == "[1,0]<stdout>:Step 10/20: 3.2 img/s total"


def test_a_first_part_cut_by_mpirun_still_shows_its_file() -> None:
    # Seen in a unit run: mpirun reads 4 KiB at a time, so a burst of 3 KB trace parts comes out with a
    # part cut in two pieces, each tagged; cut through the first part, output.log lost the file's line.
    data = json.dumps({"traceEvents": [{"name": f"op{i}", "ph": "X"} for i in range(3000)]}).encode()
    first, *rest = trace_lines("rank0.json", data)
    want = f"[1,0]<stdout>:CLUSTERCTL_TRACE rank0.json: {len(rest) + 1} part(s)"
    for cut in (10, 40, 700, len(first) - 3):  # in the marker, in the header, in the data, at the end
        glued = f"[1,0]<stdout>:{first[:cut]}[1,0]<stdout>:{first[cut:]}"
        assert shown(glued) == want, cut
    # Cut after its header, the rest on a later line after another rank's piece: still its file's line.
    split = f"[1,0]<stdout>:{first[:700]}[1,1]<stdout>:Step 1/2"
    assert shown(split) == f"{want}\n[1,1]<stdout>:Step 1/2"
    assert shown(f"[1,0]<stdout>:{first[700:]}") is None
    kept, files, problems = split_traces(
        "\n".join([split, f"[1,0]<stdout>:{first[700:]}", *("[1,0]<stdout>:" + line for line in rest)])
    )
    assert files == {"rank0.json": data} and problems == []
    assert kept.splitlines() == [want, "[1,1]<stdout>:Step 1/2"]
