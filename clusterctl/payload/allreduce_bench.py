"""Collective bandwidth on CPU ranks, over the transport the training payloads use, printed as nccl-tests does.

Shipped inside the benchmark image beside ``resnet50_bench.py`` and launched by mpirun on every rank;
it imports only torch, the standard library, Horovod (for --framework horovod) and the ResNet-50
payload's ``Trainer`` (so ranks initialise exactly as the training run does: Horovod over MPI/Gloo,
or torch.distributed's Gloo for DDP and FSDP). NCCL's nccl-tests measure GPUs; this is its CPU counterpart.

``--op``: ``allreduce`` (DDP's and Horovod's gradients), or FSDP's two: ``allgather`` (the parameters,
``all_gather_into_tensor``) and ``reducescatter`` (the gradients, ``reduce_scatter_tensor``); Horovod's
``allgather`` and ``reducescatter`` under --framework horovod. As nccl-tests counts them, ``size`` is
the whole array S: each rank's buffer for an allreduce, the gathered output for an allgather (each
rank gives S/n), the reduced input for a reduce-scatter (each rank keeps S/n).

For every size from --min-bytes to --max-bytes (doubling), rank 0 prints one row of nccl-tests'
table with its definitions (doc/PERFORMANCE.md of NVIDIA/nccl-tests): ``algbw = S / time`` and
``busbw = algbw x 2(n-1)/n`` for an allreduce, ``algbw x (n-1)/n`` for an allgather or a reduce-scatter
(GB/s, 1e9 bytes), the time being the slowest rank's mean over --iters timed operations after --warmup
ones, and ``#wrong`` the elements that differ from the expected result. Then ``# Out of bounds values``
and ``# Avg bus bandwidth``, as nccl-tests prints them. Every rank prints its own ``#  Rank`` line.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload.emit import emit_line
    from clusterctl.payload.resnet50_bench import Trainer, add_rendezvous_options, exit_cleanly
else:
    from emit import emit_line
    from resnet50_bench import Trainer, add_rendezvous_options, exit_cleanly

MIB = 1 << 20
# nccl-tests' bus bandwidth factor per collective, as a function of the ranks n (doc/PERFORMANCE.md).
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the framework and rendezvous ones as the ResNet-50 payload spells them)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["horovod", "ddp"], default="horovod")
    p.add_argument("--op", choices=list(BUS_FACTORS), default="allreduce", help="the collective measured")
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


def bus_bandwidth(size: int, seconds: float, ranks: int, op: str = "allreduce") -> tuple[float, float]:
    """nccl-tests' (algbw, busbw) in GB/s for ``op`` on ``size`` bytes (the whole array) that took ``seconds``."""
    algbw = size / seconds / 1e9
    return algbw, algbw * BUS_FACTORS[op](ranks)


class Collective:
    """One collective on float32 buffers of a whole array of ``count`` elements, over the trainer's
    framework: its input, the operation, and how many elements of its output are wrong."""

    def __init__(self, trainer: Trainer, op: str):
        self.trainer, self.op = trainer, op
        self.n, self.rank = trainer.world_size, trainer.rank

    def source(self, count: int) -> torch.Tensor:
        """This rank's input: the whole array (allreduce, reduce-scatter) or its 1/n share (allgather),
        every element ``rank + 1``."""
        share = count // self.n if self.op == "allgather" else count
        return torch.full((share,), float(self.rank + 1))

    def run(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        """The collective on ``tensor`` (left unchanged); its output."""
        if self.trainer.framework == "horovod":
            hvd = self.trainer.hvd
            if self.op == "allgather":
                return hvd.allgather(tensor, name=name)
            if self.op == "reducescatter":
                return hvd.reducescatter(tensor, name=name, op=hvd.Sum)
            return hvd.allreduce(tensor, name=name, op=hvd.Sum)
        dist = self.trainer.dist
        if self.op == "allgather":
            gathered = torch.empty(tensor.numel() * self.n)
            dist.all_gather_into_tensor(gathered, tensor)
            return gathered
        if self.op == "reducescatter":
            kept = torch.empty(tensor.numel() // self.n)
            # torch 2.13 renamed reduce_scatter_tensor (what FSDP2 calls) reduce_scatter_single.
            (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(kept, tensor)
            return kept
        summed = tensor.clone()
        dist.all_reduce(summed)
        return summed

    def wrong(self, output: torch.Tensor) -> int:
        """Elements of ``output`` that differ from the exact result: the sum 1 + ... + n, or (allgather)
        rank i's share holding i + 1."""
        n = self.n
        if self.op == "allgather":
            expected = torch.arange(1, n + 1, dtype=output.dtype).repeat_interleave(output.numel() // n)
        else:
            expected = torch.full_like(output, n * (n + 1) / 2)
        return int((output != expected).sum().item())


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table from rank 0."""
    args = parse_args(argv)
    trainer = Trainer(args)
    n, rank = trainer.world_size, trainer.rank
    collective = Collective(trainer, args.op)
    redop = "none" if args.op == "allgather" else "sum"

    # Each line the parser reads in one write (emit.py): mpirun then forwards it whole.
    emit_line(
        f"#  Rank {rank:2d} Group  0 Pid {os.getpid():6d} on {socket.gethostname():>10} device  0 [cpu] CPU"
    )
    if rank == 0:
        emit_line(f"# clusterctl allreduce_bench: framework {args.framework}, {n} ranks, float32 {args.op}")
        emit_line("#       size         count      type   redop    root     time   algbw   busbw #wrong")
        emit_line("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       ")
    busbws, wrong_total = [], 0
    for size in sizes(args.min_bytes, args.max_bytes):
        count = size // 4 // n * n  # as nccl-tests: a whole number of elements per rank
        size = count * 4
        data = collective.source(count)
        for i in range(args.warmup):
            collective.run(data, f"warmup.{size}.{i}")
        trainer.barrier()
        start = time.perf_counter()
        for i in range(args.iters):
            result = collective.run(data, f"timed.{size}.{i}")
        seconds = trainer.slowest((time.perf_counter() - start) / max(args.iters, 1))
        wrong = collective.wrong(result) if args.iters else 0
        wrong_total += wrong
        algbw, busbw = bus_bandwidth(size, seconds, n, args.op)
        busbws.append(busbw)
        if rank == 0:
            # Four decimals, not nccl-tests' two: a CPU fabric's figures are well under 1 GB/s, where
            # two decimals would keep one significant digit (check pairs compares them).
            emit_line(f"{size:12d}  {count:12d}     float  {redop:>6}      -1  {seconds * 1e6:7.1f}  {algbw:6.4f}  "
                      f"{busbw:6.4f}  {wrong:5d}")  # fmt: skip
    if rank == 0:
        emit_line(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
        emit_line(f"# Avg bus bandwidth    : {sum(busbws) / max(len(busbws), 1):.4f}")
    trainer.shutdown()
    return 0


if __name__ == "__main__":
    exit_cleanly(main())
