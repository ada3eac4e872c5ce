"""How clusterctl's per-node commands scale with the node count: sandboxes of 1, 2, 4 and 8 nodes.

For each node count N, on a fresh sandbox: `check topology`, a no-op `provision` (a first, untimed run
reaches the steady state), `status`, and `up` + `down` of the benchmark containers (the image is built
once and pushed to the sandbox first, untimed). Each command runs --repeats times as a fresh process
(its start-up included); the table gives the median and t(N)/t(1). Nothing is asserted: targets are
reported, not enforced.

Usage: .venv/bin/python bench/fanout.py [--nodes 1,2,4,8] [--repeats 3] [--transport T] [--json FILE]
       [--sandbox-state DIR]  (one count: that running sandbox, left up, instead of a fresh one)
"""

from __future__ import annotations

import statistics
from pathlib import Path

from _sandbox import arguments, print_table, sandbox, write_json

COMMANDS = ("check topology", "provision (no-op)", "status", "up + down")


def measure(nodes: int, repeats: int, transport: str | None, existing: Path | None) -> dict[str, float]:
    """Median seconds of each command on a fresh sandbox of ``nodes`` nodes (or ``existing``'s)."""
    with sandbox(nodes, "bench-fan", existing) as bench:
        bench.clusterctl("image", "build")
        bench.clusterctl("image", "push", *(["--transport", transport] if transport else []))
        bench.clusterctl("provision")  # the steady state; the timed runs below change nothing
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(repeats):
            times["check topology"].append(bench.clusterctl("check", "topology"))
            times["provision (no-op)"].append(bench.clusterctl("provision"))
            times["status"].append(bench.clusterctl("status"))
            times["up + down"].append(bench.clusterctl("up") + bench.clusterctl("down"))
        return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    """Measure every node count, print the table, write the JSON."""
    parser = arguments(__doc__, "1,2,4,8")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    figures: dict[int, dict[str, float]] = {}
    for n in counts:  # the JSON is rewritten after each count: a later failure keeps it
        figures[n] = measure(n, args.repeats, args.transport, args.sandbox_state)
        write_json(args.json, {"repeats": args.repeats, "median_s": {str(k): f for k, f in figures.items()}})
    base = figures[counts[0]]
    rows = [
        [n, *(f"{figures[n][c]:.2f} s ({figures[n][c] / base[c]:.2f})" for c in COMMANDS)] for n in counts
    ]
    print_table(f"median of {args.repeats} runs, seconds (t(N)/t({counts[0]}))", ["nodes", *COMMANDS], rows)
    write_json(args.json, {"repeats": args.repeats, "median_s": {str(n): figures[n] for n in counts}})


if __name__ == "__main__":
    main()
