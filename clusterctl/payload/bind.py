"""Bind this rank to the CPUs of its GPU, then run the rank's command. Standard library only.

Used by the ssh launcher, whose mpirun keeps the whitepaper's ``--bind-to none --map-by slot``: each
rank starts as ``python3 bind.py -- <command>``. Local rank ``i`` drives GPU ``i`` (PCI bus order, what
``nvidia-smi`` numbers and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA use), so the rank gets the
CPUs the kernel lists as local to that GPU (``/sys/bus/pci/devices/<gpu>/local_cpulist``: the "CPU
Affinity" column of ``nvidia-smi topo -m``) that it may use, shared out among the ranks whose GPUs
sit on the same CPUs; on a node without GPUs, the allowed CPUs shared out among the node's ranks.
``OMP_NUM_THREADS`` is set to the CPUs the rank got, and the payloads size torch's pool by the same
mask. Memory follows by first touch on the bound CPUs. Under srun, Slurm binds (``--cpu-bind``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload.ranks import resolve_ranks
else:
    from ranks import resolve_ranks

PCI_DEVICES = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"
# PCI classes of NVIDIA compute devices: VGA controller (0x0300xx) and 3D controller (0x0302xx).
GPU_CLASSES = ("0x0300", "0x0302")


def parse_cpu_list(text: str) -> list[int]:
    """A kernel CPU list (``0-3,8,10-11``) as CPU numbers; empty text gives none."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def gpu_cpu_lists(devices: Path = PCI_DEVICES) -> list[list[int]]:
    """Per NVIDIA GPU, in PCI bus order, the CPUs local to it (all CPUs when the kernel does not say)."""
    lists = []
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        try:
            vendor = (device / "vendor").read_text().strip()
            klass = (device / "class").read_text().strip()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and klass.startswith(GPU_CLASSES):
            try:
                lists.append(parse_cpu_list((device / "local_cpulist").read_text()))
            except OSError:
                lists.append([])
    return lists


def rank_cpus(
    local_rank: int, local_size: int, allowed: Sequence[int], gpus: Sequence[Sequence[int]]
) -> list[int]:
    """The CPUs local rank ``local_rank`` of ``local_size`` gets (pure).

    With GPUs: the allowed CPUs local to its GPU (``local_rank`` modulo the GPUs), split evenly among
    the node's ranks whose GPUs have the same CPUs. Without: the allowed CPUs split evenly among all
    ranks. A share never comes out empty: with more ranks than CPUs, ranks share CPUs round-robin.
    """
    ordered = sorted(set(allowed))
    peers = list(range(local_size))
    if gpus:
        mine = gpus[local_rank % len(gpus)]
        near = [cpu for cpu in ordered if cpu in set(mine)] or ordered
        peers = [r for r in peers if list(gpus[r % len(gpus)]) == list(mine)] or [local_rank]
        ordered = near
    position = peers.index(local_rank) if local_rank in peers else 0
    if len(ordered) < len(peers):
        return [ordered[position % len(ordered)]]
    share = len(ordered) // len(peers)
    return ordered[position * share : (position + 1) * share]


def local_size(environ: Mapping[str, str]) -> int:
    """Ranks on this node: Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``, torchrun's ``LOCAL_WORLD_SIZE``, else 1."""
    for name in ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"):
        if environ.get(name, "").isdigit():
            return int(environ[name])
    return 1


def main(argv: list[str]) -> int:
    """Bind, set ``OMP_NUM_THREADS`` and ``CUDA_DEVICE_ORDER``, then exec ``argv`` (after ``--``)."""
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print("usage: bind.py -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    ranks = resolve_ranks(os.environ)
    cpus = rank_cpus(
        ranks.local_rank, local_size(os.environ), sorted(os.sched_getaffinity(0)), gpu_cpu_lists()
    )
    os.sched_setaffinity(0, cpus)
    os.environ["OMP_NUM_THREADS"] = str(len(cpus))
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    print(
        f"bind: rank {ranks.rank} (local {ranks.local_rank}) on CPUs {','.join(map(str, cpus))}", flush=True
    )
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
