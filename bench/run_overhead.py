"""What `clusterctl run` adds to the benchmark it launches, on 1 and 2 sandbox nodes.

On a fresh sandbox (image built and delivered, containers up; untimed), for each node count N:
`clusterctl run resnet50 --nodes N` as a fresh process (wall time), and the very mpirun command it runs
and environment (`run --dry-run --json` prints them) executed by hand in the primary container (`exec_in_container`, the
payload's own time). The overhead is the difference: CLI start-up, the launch plan, the readiness
checks, streaming and recording. Medians of --repeats runs. Nothing is asserted.

Usage: .venv/bin/python bench/run_overhead.py [--nodes 1,2] [--repeats 3] [--transport T] [--json FILE]
       [--sandbox-state DIR]  (that running sandbox, left up, instead of a fresh one)
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from _sandbox import Bench, arguments, print_table, sandbox, write_json


def _payload_s(bench: Bench, nodes: int) -> float:
    """Wall time of the run's own mpirun command and environment (`run --dry-run --json`), run in the
    primary container without `clusterctl run`."""
    from clusterctl.containers.plan import container_name
    from clusterctl.hosts.container_exec import exec_in_container
    from clusterctl.inventory import load_inventory

    _, plans = bench.json("run", "resnet50", "--nodes", str(nodes), "--dry-run")
    os.environ["CLUSTERCTL_STATE_DIR"] = str(bench.state_dir)
    inventory = load_inventory(bench.inventory_path)
    primary = next(node for node in inventory.nodes if node.role == "primary")
    start = time.perf_counter()
    code = exec_in_container(
        inventory,
        primary,
        plans[0]["argv"],
        container=container_name(inventory, primary),
        env=plans[0]["env"],
        timeout_s=1800,
        on_line=lambda line: None,
    )
    took = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"the run's command exited {code} when run by hand: {plans[0]['command']}")
    return took


def measure(
    counts: list[int], repeats: int, transport: str | None, existing: Path | None = None
) -> dict[int, dict[str, float]]:
    """Median run and payload seconds per node count, on one sandbox of max(counts) nodes (or
    ``existing``'s, of at least as many)."""
    with sandbox(max(counts), "bench-run", existing, exact=False) as bench:
        bench.clusterctl("image", "build")
        bench.clusterctl("image", "push", *(["--transport", transport] if transport else []))
        bench.clusterctl("up")
        out = {}
        runs_dir = bench.state_dir / "runs"
        try:
            for n in counts:
                runs, payloads = [], []
                for _ in range(repeats):  # interleaved, so that a change in the machine's load hits both
                    runs.append(
                        bench.clusterctl("run", "resnet50", "--nodes", str(n), "--runs-dir", str(runs_dir))
                    )
                    payloads.append(_payload_s(bench, n))
                run_s, payload_s = statistics.median(runs), statistics.median(payloads)
                out[n] = {
                    "run_s": run_s,
                    "payload_s": payload_s,
                    "overhead_s": run_s - payload_s,
                    # The fastest of each is the least disturbed by other work on the machine.
                    "overhead_min_s": min(runs) - min(payloads),
                    "runs_s": runs,
                    "payloads_s": payloads,
                }
        finally:
            bench.clusterctl("down")
        return out


def main() -> None:
    """Measure, print the table, write the JSON."""
    parser = arguments(__doc__, "1,2")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]
    figures = measure(counts, args.repeats, args.transport, args.sandbox_state)
    rows = [[n, f["run_s"], f["payload_s"], f["overhead_s"], f["overhead_min_s"]] for n, f in figures.items()]
    print_table(
        f"clusterctl run resnet50, median of {args.repeats} (seconds)",
        ["nodes", "clusterctl run", "its mpirun by hand", "overhead", "overhead, fastest of each"],
        rows,
    )
    write_json(args.json, {"repeats": args.repeats, "figures": {str(n): f for n, f in figures.items()}})


if __name__ == "__main__":
    main()
