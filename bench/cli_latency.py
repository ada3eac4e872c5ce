"""Print how long the CLI takes to start: `clusterctl --help` and `clusterctl inventory validate`.

Each command runs N times (default 20) as a fresh process through the installed console script, after
one untimed run that caches its bytecode; the figures are the median wall time and the median CPU time
(user + system) of the process. `python -c pass` is measured in the same run and each median is also
given as a multiple of it, so figures from a loaded or a slower machine can still be compared.
Usage: python bench/cli_latency.py [--runs 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

INVENTORY = Path(__file__).resolve().parents[1] / "inventories" / "paper-c4140.yml"
CLUSTERCTL = Path(sys.executable).with_name("clusterctl")

CASES: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "clusterctl --help": [str(CLUSTERCTL), "--help"],
    "clusterctl inventory validate inventories/paper-c4140.yml": [
        str(CLUSTERCTL),
        "inventory",
        "validate",
        str(INVENTORY),
    ],
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# The commands run as on a user's machine, where Python caches the bytecode it compiles: a
# PYTHONDONTWRITEBYTECODE in this environment would make every run recompile each module changed since
# its cached bytecode was written (10 ms for the inventory module alone).
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def medians(argv: list[str], runs: int) -> tuple[float, float]:
    """(median wall time, median CPU time) of ``runs`` runs of ``argv``, after one untimed run.

    The untimed run writes the bytecode caches. CPU time (user + system of the process) is given
    beside wall time because it moves less when other work shares the machine. Raises if a run fails.
    """

    def once() -> None:
        subprocess.run(
            argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENVIRONMENT
        )

    once()
    walls, cpus = [], []
    for _ in range(runs):
        cpu, start = _children_cpu_s(), time.perf_counter()
        once()
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu_s() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    """Measure every case, print one line each, and write JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="Runs per command (default 20).")
    parser.add_argument("--json", type=Path, help="Also write the figures as JSON to this file.")
    args = parser.parse_args()
    figures = {name: medians(argv, args.runs) for name, argv in CASES.items()}
    baseline = figures["python -c pass"][0]
    cpu = platform.processor() or platform.machine()
    print(
        f"median of {args.runs} runs; {os.cpu_count()} CPUs ({cpu}); "
        f"load average {os.getloadavg()[0]:.2f} (1 min, at the end)"
    )
    for name, (wall, cpu_s) in figures.items():
        print(f"{name:58s} wall {wall:6.3f} s ({wall / baseline:5.1f} x python)  cpu {cpu_s:6.3f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "runs": args.runs,
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()[0],
                    "median_wall_s": {name: wall for name, (wall, _) in figures.items()},
                    "median_cpu_s": {name: cpu_s for name, (_, cpu_s) in figures.items()},
                    "wall_ratio_to_python": {name: wall / baseline for name, (wall, _) in figures.items()},
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
