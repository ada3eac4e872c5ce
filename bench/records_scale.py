"""Print how `clusterctl report` and `clusterctl explain` grow with the records they read (issue 41 item 7).

report: N run directories (default 100, 1,000 and 10,000) made from the real recorded runs of
tests/fixtures/explain/scaling/ (the 1-node and the 2-node ResNet-50 run, with their breakdowns), each a
copy of one of them with its own run id, start time, batch size (one per 100 runs, 4 at least: 2
report rows each) and figures (the
throughput and every breakdown figure scaled by a factor drawn from a seeded generator). `report` runs in
this process (after one untimed run on a small directory, so imports are not counted) twice: without
an index (the first report: every result.json read and listed) and after `report --rebuild-index` (the
index current: the order read from it); the rebuild is timed too.

explain: runs of R ranks (default 2, 128 and 1,024), 8 ranks per node, made from the real 2-rank run's
CLUSTERCTL_BREAKDOWN lines (rank r takes rank r % 2's line, its figures scaled as above, host node<r//8+1>):
the lines are written to output.log, parsed by the judge's parser (timed: "parse"), the record gets the
parsed breakdown, the world size, the nodes and the POP figures computed from it, and each node a copy of
the fixture's node1 telemetry. `explain RUN` runs in this process, its output thrown away.

Each figure is the median wall time of --repeats runs (default 3) with the CPU time of the same run;
growth is each figure's CPU time over the smallest size's, beside the size's own ratio (linear growth:
the two match; CPU, since other work on the machine stretches the wall time). --profile prints cProfile's top functions for the largest size of each command.
Usage: python bench/records_scale.py [--runs 100,1000,10000] [--ranks 2,128,1024] [--repeats 3]
                                     [--profile] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterctl.cli import main  # noqa: E402
from clusterctl.results.pop import run_pop  # noqa: E402
from clusterctl.workloads.breakdown import BREAKDOWN_PREFIX, parse_breakdown  # noqa: E402

SCALING = ROOT / "tests" / "fixtures" / "explain" / "scaling"
TEMPLATES = (SCALING / "20261126T002851Z_resnet50_1n", SCALING / "20261126T003332Z_resnet50_2n")
RANKS_PER_NODE = 8
RUNS_PER_CONFIG = 100  # a history's configurations grow with it: one batch size per 100 runs, 4 at least


def _scaled(value: Any, factor: float) -> Any:
    """Every float in ``value`` (a JSON tree) times ``factor``; the rest as it is."""
    if isinstance(value, float):
        return value * factor
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    return value


def make_runs(root: Path, count: int, seed: int = 41) -> Path:
    """``count`` run directories under ``root/runs-<count>``, each a varied copy of a fixture run."""
    runs = root / f"runs-{count}"
    runs.mkdir()
    rng = random.Random(seed)
    records = [json.loads((t / "result.json").read_text()) for t in TEMPLATES]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batches = max(4, count // RUNS_PER_CONFIG)
    for i in range(count):
        record = dict(records[i % 2])
        when = start + timedelta(minutes=5 * i)
        record["run_id"] = f"{when:%Y%m%dT%H%M%SZ}_resnet50_{record['nodes']}n_{i:05d}"
        record["started_at"] = when.isoformat().replace("+00:00", "Z")
        record["config"] = record["config"] | {"batch_size": 4 * (1 + (i // 2) % batches)}
        factor = rng.uniform(0.85, 1.15)
        record["metrics"] = _scaled(record["metrics"], factor)
        if record.get("breakdown"):
            record["breakdown"] = _scaled(record["breakdown"], 1 / factor)
        directory = runs / record["run_id"]
        directory.mkdir()
        (directory / "result.json").write_text(json.dumps(record))
    return runs


def make_explained_run(root: Path, ranks: int, seed: int = 41) -> tuple[Path, float]:
    """A run directory of ``ranks`` ranks made from the 2-rank run, and the seconds its breakdown lines
    took to parse."""
    template = TEMPLATES[1]
    rng = random.Random(seed)
    lines = [line for line in (template / "output.log").read_text().splitlines() if BREAKDOWN_PREFIX in line]
    by_rank = {}
    for line in lines:
        body = line.partition(BREAKDOWN_PREFIX)[2]
        figures = json.loads(body)
        by_rank[figures["rank"]] = figures
    nodes = max(1, ranks // RANKS_PER_NODE)
    out = []
    for r in range(ranks):
        figures = _scaled(by_rank[r % 2], rng.uniform(0.9, 1.1))
        figures |= {"rank": r, "world_size": ranks, "host": f"node{r // RANKS_PER_NODE + 1}"}
        out.append(f"[1,{r}]<stdout>:{BREAKDOWN_PREFIX}{json.dumps(figures)}")
    record = json.loads((template / "result.json").read_text())
    run_id = f"20261126T003332Z_resnet50_{nodes}n_{ranks}r"
    run = root / f"explain-{ranks}" / run_id
    shutil.copytree(template, run, ignore=shutil.ignore_patterns("telemetry", "topology"))
    log = "\n".join(out) + "\n"
    (run / "output.log").write_text(log)
    began = time.perf_counter()
    breakdown = parse_breakdown(log)
    parse_s = time.perf_counter() - began
    assert len(breakdown) == ranks, (len(breakdown), ranks)
    pop = run_pop(breakdown, ranks)
    record |= {
        "run_id": run_id,
        "nodes": nodes,
        "world_size": ranks,
        "breakdown": [b.model_dump(mode="json") for b in breakdown],
        "pop": pop.model_dump(mode="json") if pop is not None else None,
    }
    (run / "result.json").write_text(json.dumps(record))
    (run / "telemetry").mkdir()
    sample = (template / "telemetry" / "node1.jsonl").read_text()
    for n in range(1, nodes + 1):
        (run / "telemetry" / f"node{n}.jsonl").write_text(sample)
    return run, parse_s


def _cli(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``clusterctl ARGV`` in this process, its output thrown away."""
    sink = io.StringIO()
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if code != 0:
        raise SystemExit(f"clusterctl {' '.join(argv)} exited {code}:\n{sink.getvalue()[-2000:]}")
    return wall, cpu


def _median(argv: list[str], repeats: int, before: list[str] | None = None) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        if before:
            _cli(before)
        times.append(_cli(argv))
    wall = statistics.median(t[0] for t in times)
    cpu = next(c for w, c in times if w == wall)
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}


def _profile(argv: list[str], top: int = 30) -> str:
    profile = cProfile.Profile()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        profile.runcall(main, argv)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def _growth(rows: list[dict[str, Any]], size: str, figures: tuple[str, ...]) -> None:
    """Each figure's CPU time over the smallest size's (CPU, not wall: other work on the machine stretches
    the wall time and leaves the CPU time)."""
    base = rows[0]
    for row in rows:
        row["size_ratio"] = round(row[size] / base[size], 2)
        for figure in figures:
            row[f"{figure}_growth"] = round(row[figure]["cpu_s"] / max(base[figure]["cpu_s"], 1e-6), 2)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="100,1000,10000")
    parser.add_argument("--ranks", default="2,128,1024")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    counts = [int(c) for c in args.runs.split(",")]
    rank_counts = [int(r) for r in args.ranks.split(",")]
    os.environ.setdefault("COLUMNS", "120")
    result: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_at_start": os.getloadavg()[0],
        "repeats": args.repeats,
        "report": [],
        "explain": [],
    }
    with tempfile.TemporaryDirectory(prefix="records-scale-") as tmp:
        root = Path(tmp)
        (root / "warm").mkdir()
        _cli(["report", "--runs-dir", str(make_runs(root / "warm", 10))])  # imports, not counted
        for count in counts:
            runs = make_runs(root, count)
            report = ["report", "--runs-dir", str(runs)]
            row: dict[str, Any] = {"runs": count}
            row["no_index"] = _median(report, args.repeats)
            row["rebuild_index"] = _median([*report[:3], "--rebuild-index"], 1)
            row["index_current"] = _median(report, args.repeats)
            result["report"].append(row)
            print(f"report {count:>6} runs: no index {row['no_index']['wall_s']:.3f} s, rebuild "
                  f"{row['rebuild_index']['wall_s']:.3f} s, index current {row['index_current']['wall_s']:.3f} s",
                  flush=True)  # fmt: skip
            if args.profile and count == counts[-1]:
                result["report_profile"] = _profile(report)
            shutil.rmtree(runs)
        _growth(result["report"], "runs", ("no_index", "index_current"))
        for ranks in rank_counts:
            run, parse_s = make_explained_run(root, ranks)
            row = {"ranks": ranks, "parse": {"wall_s": round(parse_s, 4), "cpu_s": round(parse_s, 4)}}
            row["explain"] = _median(["explain", str(run)], args.repeats)
            result["explain"].append(row)
            print(f"explain {ranks:>5} ranks: parse {parse_s:.3f} s, explain {row['explain']['wall_s']:.3f} s",
                  flush=True)  # fmt: skip
            if args.profile and ranks == rank_counts[-1]:
                result["explain_profile"] = _profile(["explain", str(run)])
        _growth(result["explain"], "ranks", ("parse", "explain"))
    result["load_at_end"] = os.getloadavg()[0]
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


def _print(result: dict[str, Any]) -> None:
    print(f"\n{result['machine']}; load {result['load_at_start']:.1f} at the start, {result['load_at_end']:.1f} "
          f"at the end; median of {result['repeats']} (wall s, CPU s in brackets)")  # fmt: skip
    print(
        "| runs | report, no index | report, index current | report --rebuild-index | runs x | CPU x, no index | CPU x, index |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in result["report"]:
        print(f"| {r['runs']:,} | {r['no_index']['wall_s']:.3f} ({r['no_index']['cpu_s']:.3f}) "
              f"| {r['index_current']['wall_s']:.3f} ({r['index_current']['cpu_s']:.3f}) "
              f"| {r['rebuild_index']['wall_s']:.3f} | {r['size_ratio']:g} | {r['no_index_growth']:g} "
              f"| {r['index_current_growth']:g} |")  # fmt: skip
    print("\n| ranks | parse the breakdown lines (wall) | explain | ranks x | parse x | CPU x, explain |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in result["explain"]:
        print(f"| {r['ranks']:,} | {r['parse']['wall_s']:.4f} | {r['explain']['wall_s']:.3f} "
              f"({r['explain']['cpu_s']:.3f}) | {r['size_ratio']:g} | {r['parse_growth']:g} "
              f"| {r['explain_growth']:g} |")  # fmt: skip
    for key in ("report_profile", "explain_profile"):
        if key in result:
            print(f"\n{key}:\n{result[key]}")


if __name__ == "__main__":
    main_bench()
