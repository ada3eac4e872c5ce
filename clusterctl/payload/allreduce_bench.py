"""Allreduce bandwidth on CPU ranks, over the transport the ResNet-50 payload uses, printed as nccl-tests does.

Shipped inside the benchmark image beside ``resnet50_bench.py`` and launched by mpirun on every rank;
it imports only torch, the standard library, Horovod (for --framework horovod) and the ResNet-50
payload's ``Trainer`` (so ranks initialise exactly as the training run does: Horovod over MPI/Gloo,
or torch.distributed's Gloo for DDP). NCCL's nccl-tests measure GPUs; this is its CPU counterpart.

For every size from --min-bytes to --max-bytes (doubling), rank 0 prints one row of nccl-tests'
table with its definitions: ``algbw = size / time`` and ``busbw = algbw x 2(n-1)/n`` (GB/s, 1e9
bytes), the time being the slowest rank's mean over --iters timed allreduces after --warmup ones,
and ``#wrong`` the elements that differ from the expected sum. Then ``# Out of bounds values`` and
``# Avg bus bandwidth``, as nccl-tests prints them. Every rank prints its own ``#  Rank`` line.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload.resnet50_bench import Trainer, add_rendezvous_options
else:
    from resnet50_bench import Trainer, add_rendezvous_options

MIB = 1 << 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the framework and rendezvous ones as the ResNet-50 payload spells them)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["horovod", "ddp"], default="horovod")
    p.add_argument("--min-bytes", type=int, default=MIB)
    p.add_argument("--max-bytes", type=int, default=64 * MIB)
    p.add_argument("--iters", type=int, default=5, help="timed allreduces per size")
    p.add_argument("--warmup", type=int, default=1, help="untimed allreduces per size")
    add_rendezvous_options(p)
    return p.parse_args(argv)


def sizes(low: int, high: int) -> list[int]:
    """Doubling sizes from ``low`` to ``high`` bytes, each a whole number of float32 elements."""
    out, size = [], max(4, low - low % 4)
    while size <= high:
        out.append(size)
        size *= 2
    return out


def bus_bandwidth(size: int, seconds: float, ranks: int) -> tuple[float, float]:
    """nccl-tests' (algbw, busbw) in GB/s for an allreduce of ``size`` bytes that took ``seconds``."""
    algbw = size / seconds / 1e9
    return algbw, algbw * 2 * (ranks - 1) / ranks


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table from rank 0."""
    args = parse_args(argv)
    trainer = Trainer(args)
    n, rank = trainer.world_size, trainer.rank

    def allreduce(tensor: torch.Tensor, name: str) -> torch.Tensor:
        if trainer.framework == "horovod":
            return trainer.hvd.allreduce(tensor, name=name, op=trainer.hvd.Sum)
        trainer.dist.all_reduce(tensor)
        return tensor

    print(f"#  Rank {rank:2d} Group  0 Pid {os.getpid():6d} on {socket.gethostname():>10} device  0 [cpu] CPU",
          flush=True)  # fmt: skip
    if rank == 0:
        print(f"# clusterctl allreduce_bench: framework {args.framework}, {n} ranks, float32 sum", flush=True)
        print(
            "#       size         count      type   redop    root     time   algbw   busbw #wrong", flush=True
        )
        print(
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       ", flush=True
        )
    busbws, wrong_total = [], 0
    for size in sizes(args.min_bytes, args.max_bytes):
        count = size // 4
        data = torch.full((count,), float(rank + 1))
        for i in range(args.warmup):
            allreduce(data.clone(), f"warmup.{size}.{i}")
        trainer.barrier()
        start = time.perf_counter()
        for i in range(args.iters):
            result = allreduce(data.clone(), f"timed.{size}.{i}")
        seconds = trainer.slowest((time.perf_counter() - start) / max(args.iters, 1))
        wrong = int((result != n * (n + 1) / 2).sum().item()) if args.iters else 0
        wrong_total += wrong
        algbw, busbw = bus_bandwidth(size, seconds, n)
        busbws.append(busbw)
        if rank == 0:
            # Four decimals, not nccl-tests' two: a CPU fabric's figures are well under 1 GB/s, where
            # two decimals would keep one significant digit (check pairs compares them).
            print(f"{size:12d}  {count:12d}     float     sum      -1  {seconds * 1e6:7.1f}  {algbw:6.4f}  "
                  f"{busbw:6.4f}  {wrong:5d}", flush=True)  # fmt: skip
    if rank == 0:
        print(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}", flush=True)
        print(f"# Avg bus bandwidth    : {sum(busbws) / max(len(busbws), 1):.4f}", flush=True)
    trainer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
