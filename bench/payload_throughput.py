"""Print the payload's ResNet-50 training throughput (img/s) on this machine, for a grid of settings.

Runs the payload script itself (one process, DDP with world size 1: Gloo on a CPU, NCCL on a GPU), so
every figure is the benchmark's own measurement. It needs only Python and torch (no clusterctl
install), so it runs as it is on a GPU host. One line per run, then a table; ``--json FILE`` keeps
every result line with the machine's details.

    python bench/payload_throughput.py                          # CPU: fp32, 64 px, batches 4 and 16
    python bench/payload_throughput.py --image-size 224 --batch-sizes 256 --precisions bf16,fp16 \\
        --channels-last --compile off,on --warmup-steps 10 --steps 100   # one GPU (bench/README.md)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

PAYLOAD = Path(__file__).resolve().parents[1] / "clusterctl" / "payload" / "resnet50_bench.py"
PREFIX = "CLUSTERCTL_RESULT "


def measure(settings: dict[str, object], timeout_s: float) -> dict[str, object]:
    """One payload run with ``settings``; its result line as a dict, or the error and output tail."""
    argv = [
        sys.executable,
        str(PAYLOAD),
        "--framework=ddp",
        f"--batch-size={settings['batch']}",
        f"--precision={settings['precision']}",
        f"--image-size={settings['image_size']}",
        f"--steps={settings['steps']}",
        f"--warmup-steps={settings['warmup_steps']}",
        f"--display-every={settings['steps']}",
        f"--master-port={29500 + os.getpid() % 1000}",
    ]
    argv += ["--channels-last"] if settings["channels_last"] else []
    argv += ["--compile"] if settings["compile"] else []
    env = {**os.environ, "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**settings, "error": f"timed out after {timeout_s:g} s"}
    line = next((x for x in done.stdout.splitlines() if x.startswith(PREFIX)), None)
    if done.returncode != 0 or line is None:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        return {**settings, "error": f"exit {done.returncode}: " + " | ".join(tail)}
    return {**settings, **json.loads(line.removeprefix(PREFIX))}


def machine() -> dict[str, str]:
    """CPU count, and the GPU's name and driver where nvidia-smi answers."""
    info = {"cpu_count": str(os.cpu_count()), "processor": platform.processor() or platform.machine()}
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()[0]
        info["gpu"], info["driver"] = (part.strip() for part in smi.split(",", 1))
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        pass
    return info


def main() -> None:
    """Measure every combination and print one line each, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--batch-sizes", default="4,16")
    parser.add_argument("--precisions", default="fp32", help="comma list of fp32, fp16, bf16")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", default="off", help="comma list of off, on")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one run may take")
    parser.add_argument("--json", type=Path, help="write the machine and every result here")
    args = parser.parse_args()
    grid = itertools.product(
        [int(b) for b in args.batch_sizes.split(",")],
        args.precisions.split(","),
        [c == "on" for c in args.compile.split(",")],
    )
    info = machine()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    results = []
    for batch, precision, compiled in grid:
        settings = {
            "batch": batch,
            "precision": precision,
            "compile": compiled,
            "channels_last": args.channels_last,
            "image_size": args.image_size,
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
        }
        result = measure(settings, args.timeout)
        results.append(result)
        print(json.dumps(result, sort_keys=True), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"machine": info, "results": results}, indent=2))
    print(f"\n{'batch':>5} {'precision':>9} {'layout':>6} {'compile':>7} {'img/s':>10}  torch / CUDA")
    for r in results:
        rate = f"{r['total_images_per_sec']:>10,.1f}" if "total_images_per_sec" in r else f"{'failed':>10}"
        layout = "NHWC" if r["channels_last"] else "NCHW"
        print(
            f"{r['batch']:>5} {r['precision']:>9} {layout:>6} {'on' if r['compile'] else 'off':>7} {rate}  "
            f"{r.get('torch_version', '-')} / {r.get('cuda_version', '-')}"
        )


if __name__ == "__main__":
    main()
