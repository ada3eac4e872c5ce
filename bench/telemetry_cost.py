"""Print what issue 22's instrumentation costs on this machine: the node sampler's CPU time per sampled
second, and the payload's throughput with its per-step breakdown on against off.

- Sampler: ``clusterctl/payload/nodesampler.py`` run as the ssh launcher runs it (one sample a second)
  for ``--sampler-seconds``, its CPU time (user + system, from the kernel's accounting of the child)
  divided by the seconds it sampled. nvidia-smi runs only where there is one.
- Breakdown: the ResNet-50 payload (one process, DDP world size 1, as ``payload_throughput.py``) with
  ``CLUSTERCTL_BREAKDOWN=1`` and ``=0`` alternately, ``--repeats`` runs each; the median img/s of each
  and their ratio.

    python bench/telemetry_cost.py [--sampler-seconds 30] [--repeats 3] [--json FILE]

Needs only Python and torch, like ``payload_throughput.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload_throughput import machine, measure  # a sibling script, not a package

SAMPLER = Path(__file__).resolve().parents[1] / "clusterctl" / "payload" / "nodesampler.py"


def sampler_cost(seconds: float) -> dict[str, float]:
    """CPU seconds the sampler used per second it sampled (one sample a second, every source)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SAMPLER), "--max-seconds", f"{seconds:g}", "--net", "lo"],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    samples = len(done.stdout.splitlines())
    return {"seconds": round(wall, 2), "samples": samples, "cpu_s": round(cpu, 3), "cpu_per_s": cpu / wall}


def breakdown_cost(repeats: int, settings: dict[str, object], timeout_s: float) -> dict[str, object]:
    """Median img/s with the breakdown on and off (runs alternate, so drift hits both alike)."""
    rates: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(repeats):
        for state in ("on", "off"):
            os.environ["CLUSTERCTL_BREAKDOWN"] = "1" if state == "on" else "0"
            result = measure(settings, timeout_s)
            if "error" in result:
                raise SystemExit(f"payload run failed ({state}): {result['error']}")
            rates[state].append(float(result["total_images_per_sec"]))  # type: ignore[arg-type]
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    return {"img_s": rates, "median_on": on, "median_off": off, "on_over_off": on / off}


def main() -> None:
    """Measure both and print them; ``--json`` keeps them with the machine's details."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampler-seconds", type=float, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900, help="seconds one payload run may take")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    info = machine()
    info["loadavg_before"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    sampler = sampler_cost(args.sampler_seconds)
    print(
        f"sampler: {sampler['cpu_s']:.2f} CPU s over {sampler['seconds']:.1f} s ({sampler['samples']} samples): "
        f"{sampler['cpu_per_s'] * 100:.2f}% of one core",
        flush=True,
    )
    settings = {
        "batch": args.batch_size,
        "precision": "fp32",
        "compile": False,
        "channels_last": False,
        "image_size": args.image_size,
        "steps": args.steps,
        "warmup_steps": 2,
    }
    breakdown = breakdown_cost(args.repeats, settings, args.timeout)
    print(
        f"breakdown: {breakdown['median_on']:.2f} img/s on, {breakdown['median_off']:.2f} off "
        f"(on/off {breakdown['on_over_off']:.3f}; runs {breakdown['img_s']})",
        flush=True,
    )
    info["loadavg_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if args.json:
        args.json.write_text(
            json.dumps({"machine": info, "sampler": sampler, "breakdown": breakdown}, indent=2)
        )


if __name__ == "__main__":
    main()
