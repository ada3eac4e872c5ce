"""Print the payload's ResNet-50 training throughput (img/s) on this machine's CPU, for a few batch sizes.

Runs the payload script itself (one process, DDP over Gloo with world size 1), so the number is the
benchmark's own measurement. Usage: python bench/payload_throughput.py [--image-size 64] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

PAYLOAD = Path(__file__).resolve().parents[1] / "clusterctl" / "payload" / "resnet50_bench.py"
PREFIX = "CLUSTERCTL_RESULT "


def measure(batch_size: int, image_size: int, steps: int) -> dict[str, object]:
    """One payload run; its result line as a dict."""
    argv = [
        sys.executable,
        str(PAYLOAD),
        "--framework=ddp",
        f"--batch-size={batch_size}",
        f"--image-size={image_size}",
        f"--steps={steps}",
        "--warmup-steps=2",
        f"--display-every={steps}",
    ]
    env = {**os.environ, "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
    line = next(line for line in out.splitlines() if line.startswith(PREFIX))
    return json.loads(line.removeprefix(PREFIX))


def main() -> None:
    """Measure and print one line per batch size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-sizes", default="4,16")
    args = parser.parse_args()
    print(f"cpu threads: {os.cpu_count()}, image size {args.image_size}, {args.steps} measured steps")
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        r = measure(batch, args.image_size, args.steps)
        print(f"batch {batch:>4}: {r['total_images_per_sec']:>8.2f} img/s (torch {r['torch_version']}, fp32)")


if __name__ == "__main__":
    main()
