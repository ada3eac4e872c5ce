"""The resnet50 payload's real-data options, apart from the pipeline so that a synthetic run never
imports Pillow (shipped beside ``resnet50_bench.py``; the standard library only)."""

from __future__ import annotations

import argparse
import os


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """The real-data options of the payload."""
    parser.add_argument("--data", default=None, help="ImageNet-layout directory; default: synthetic tensors")
    parser.add_argument(
        "--loader-workers",
        type=int,
        default=None,
        help="DataLoader workers per rank; default: allowed CPUs / 2",
    )
    parser.add_argument(
        "--skip-bad-images", action="store_true", help="leave out and count undecodable files"
    )
    parser.add_argument("--loader-only", action="store_true", help="run the input pipeline alone (no model)")
    parser.add_argument("--epochs", type=int, default=None, help="train whole epochs, evaluating after each")
    parser.add_argument(
        "--target-top1", type=float, default=None, help="report when val top-1 first reaches it"
    )
    parser.add_argument(
        "--base-lr", type=float, default=0.1, help="learning rate per 256 images of global batch"
    )
    parser.add_argument(
        "--warmup-epochs", type=float, default=1.0, help="linear learning-rate warm-up, epochs"
    )


def default_workers() -> int:
    """Half the CPUs this rank may use (the other half computes), at least 1, at most 8."""
    return max(1, min(8, len(os.sched_getaffinity(0)) // 2))
