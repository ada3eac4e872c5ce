"""The payload's collective benchmark on CPU ranks: the fabric's bus bandwidth over the training transport.

nccl-tests measures GPUs through NCCL; a CPU cluster's gradients go through Horovod (MPI or Gloo)
or torch.distributed's Gloo, so this workload measures exactly that, with the ResNet-50 payload's
own initialisation, and prints nccl-tests' table (same parser, same metrics and sanity checks, same
``busbw = algbw x 2(n-1)/n``, or ``x (n-1)/n`` for FSDP's allgather and reducescatter: ``--op``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.errors import InputError
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.workloads.base import Volume
from clusterctl.workloads.nccl_tests import NcclTests, allreduce_equivalent

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, RunDefaults

SCRIPT = f"{CONTAINER_PAYLOAD_DIR}/allreduce_bench.py"
# The payload's defaults (allreduce_bench.py): 1 MiB to 64 MiB doubling, 1 warm-up and 5 timed
# allreduces per size; a unit test reads them from the payload.
SIZES = tuple(1 << k for k in range(20, 27))
REPEATS = 1 + 5


class Allreduce(NcclTests):
    """Float32 sum allreduce from ``min_bytes`` (default 1 MiB) to ``max_bytes`` (default 64 MiB),
    doubling, on CPU ranks, over the run's framework."""

    name = "allreduce"
    model = "allreduce"
    description = "clusterctl's CPU allreduce bandwidth benchmark (Horovod or Gloo, as the payload trains)"

    def __init__(self, max_bytes: int = SIZES[-1], min_bytes: int = SIZES[0]) -> None:
        """``max_bytes`` and ``min_bytes``: the largest and smallest sizes (each one of ``SIZES``); fewer
        keep the run short (check pairs judges one size only)."""
        for name, value in (("max_bytes", max_bytes), ("min_bytes", min_bytes)):
            if value not in SIZES:
                raise ValueError(f"{name} {value} is not one of the payload's sizes {SIZES}")
        if min_bytes > max_bytes:
            raise ValueError(f"min_bytes {min_bytes} is above max_bytes {max_bytes}")
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes

    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """``python allreduce_bench.py`` over the settings' framework (and ``--min-bytes``/``--max-bytes``
        where they narrow the default sizes).

        Raises:
            InputError: the run has GPUs (nccl-tests measures those).
        """
        if gpu:
            raise InputError("allreduce measures CPU ranks; on GPUs run nccl-tests.")
        # FSDP's collectives go through torch.distributed's backend, as DDP's do.
        framework = "ddp" if settings.framework == "fsdp" else settings.framework
        smaller = [f"--min-bytes={self.min_bytes}"] if self.min_bytes != SIZES[0] else []
        smaller += [f"--max-bytes={self.max_bytes}"] if self.max_bytes != SIZES[-1] else []
        op = [f"--op={settings.collective}"] if settings.collective != "allreduce" else []
        return ["python", SCRIPT, f"--framework={framework}", *op, *smaller]

    def allreduce_volume(self, settings: RunDefaults) -> Volume:
        """Every size, warm-up and timed: sum(sizes) x (warm-up + iterations), halved for an allgather or
        a reduce-scatter (``allreduce_equivalent``)."""
        total = sum(size for size in SIZES if self.min_bytes <= size <= self.max_bytes)
        op = settings.collective
        return Volume(
            bytes=allreduce_equivalent(total * REPEATS, op),
            derivation=f"{total:,} B of sizes x {REPEATS} {op}s" + ("" if op == "allreduce" else " / 2"),
        )

    def model_of(self, collective: str) -> str:
        """The record's model for ``collective``: its name (``allgather``)."""
        return collective

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """PyTorch, which the benchmark is written in."""
        return None if versions.framework == "pytorch" else "PyTorch"
