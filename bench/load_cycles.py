"""Issue 15's load cycle, with figures: an N-node sandbox (default 8), then provision + image build +
image push + up + run + down, K times (default 3); prints each command's exit code and seconds per
cycle, whether the runs agree, and what differs between the listings after each cycle (leaks).

The same cycle is the `load` test (`pytest -m load tests/load`), which asserts on it. Heavy: on a
2-core machine the first push to 8 fresh nodes alone moves 8 x 1.6 GB.
Usage: python bench/load_cycles.py [--nodes 8] [--cycles 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ of this checkout

from tests.helpers.cycles import run_cycles


def main() -> int:
    """Run the cycles, print the figures, return 1 if a command failed or something leaked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clusterctl-load-") as tmp:
        report = run_cycles(Path(tmp) / "state", nodes=args.nodes, cycles=args.cycles)
    table: dict[str, dict[int, str]] = defaultdict(dict)
    for step in report.steps:
        failed = "" if step.exit_code == 0 else f" (exit {step.exit_code})"
        table[step.name][step.cycle] = f"{step.seconds:.1f} s{failed}"
    cycles = range(1, args.cycles + 1)
    print(f"{args.nodes}-node sandbox, {args.cycles} cycles ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")
    print(f"  {'command':<16}" + "".join(f"{f'cycle {c}':>18}" for c in cycles))
    for name, cells in table.items():
        row = [cells[0]] if 0 in cells else [cells.get(c, "-") for c in cycles]
        print(f"  {name:<16}" + "".join(f"{cell:>18}" for cell in row))
    for step in (s for s in report.steps if s.name == "image push"):
        print(
            f"  push, cycle {step.cycle}: {step.stdout.strip().splitlines()[-1] if step.stdout.strip() else '-'}"
        )
    rates = [r["metrics"]["total_images_per_sec"]["value"] for r in report.runs if r.get("metrics")]
    print(
        f"runs: {len(report.runs)}, valid: {sum(r['valid'] for r in report.runs)}, "
        f"same command: {len(set(report.commands)) == 1}, img/s: {', '.join(f'{x:.2f}' for x in rates)}"
    )
    leaks = report.leaks()
    print("leaks: none" if not leaks else f"leaks: {json.dumps(leaks, indent=2)}")
    if args.json:
        args.json.write_text(json.dumps(
            {"nodes": args.nodes, "cycles": args.cycles,
             "steps": [{k: v for k, v in asdict(s).items() if k not in ("stdout", "stderr")} for s in report.steps],
             "runs": report.runs, "leaks": leaks}, indent=2) + "\n")  # fmt: skip
    return 1 if report.failed() or leaks else 0


if __name__ == "__main__":
    sys.exit(main())
