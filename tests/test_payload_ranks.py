"""The payload's rank from any launcher (payload/ranks.py) and its CPU share (payload/bind.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from tests.fixtures import fixture_text

PAYLOAD = Path(__file__).resolve().parents[1] / "clusterctl" / "payload"
sys.path.insert(0, str(PAYLOAD))  # the payload imports its siblings from its own directory, as in the image

from bind import gpu_cpu_lists, parse_cpu_list, rank_cpus  # type: ignore[import-not-found]  # noqa: E402  (the payload's top-level names, as in the image)
from ranks import RankError, Ranks, resolve_ranks  # type: ignore[import-not-found]  # noqa: E402

# What each launcher sets for the second rank on the second node of a 2 x 2 job (srun: the Slurm
# manual's OUTPUT ENVIRONMENT VARIABLES; mpirun: Open MPI's mpirun(1) "Exported Environment Variables";
# torchrun: torch.distributed.run's docs).
SRUN = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "PMIX_RANK": "3"}
MPIRUN = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}


@pytest.mark.parametrize("environ", [SRUN, MPIRUN, TORCHRUN, {**SRUN, **MPIRUN, **TORCHRUN}])
def test_every_launcher_gives_the_same_rank(environ: dict[str, str]) -> None:
    ranks = resolve_ranks(environ)
    assert (ranks.rank, ranks.world_size, ranks.local_rank) == (3, 4, 1)


def test_the_sources_are_named_in_their_order() -> None:
    assert resolve_ranks(SRUN).source == "Slurm = PMIx"
    assert resolve_ranks({**TORCHRUN, **MPIRUN}).source == "Open MPI = torchrun"
    assert resolve_ranks({"PATH": "/bin"}) == Ranks(0, 1, 0, "none (a single process)")


def test_launchers_that_disagree_stop_the_rank() -> None:
    # mpirun inside a Slurm batch step: every rank inherits the batch step's SLURM_PROCID=0
    with pytest.raises(
        RankError, match=r"disagree on the rank: OMPI_COMM_WORLD_RANK=3 \(Open MPI\), SLURM_PROCID=0"
    ):
        resolve_ranks({**MPIRUN, "SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"})
    with pytest.raises(RankError, match="world size"):
        resolve_ranks({**SRUN, "WORLD_SIZE": "8"})


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"PMIX_RANK": "1"}, "no world size and no local rank"),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "no local rank"),
        ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}, "not below the world size"),
        ({"SLURM_PROCID": "x", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}, "SLURM_PROCID='x'"),
    ],
)
def test_an_incomplete_or_impossible_rank_is_refused(environ: dict[str, str], words: str) -> None:
    with pytest.raises(RankError, match=words):
        resolve_ranks(environ)


def test_a_single_process_needs_no_local_rank() -> None:
    assert resolve_ranks({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}).world_size == 1


# A DGX-1's CPU affinity per GPU from its real `nvidia-smi topo -m` (the same column the kernel's
# local_cpulist gives bind.py): GPUs 0-3 on CPUs 0-19,40-59, GPUs 4-7 on 20-39,60-79.
_TOPO = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/msccl-dgx1-8gpu-nv1nv2-4nic-phb.txt"))
DGX1 = [parse_cpu_list(_TOPO.cpu_affinity[f"GPU{i}"]) for i in range(8)]


def test_a_rank_gets_its_own_share_of_its_gpus_socket() -> None:
    allowed = list(range(80))
    shares = [rank_cpus(r, 8, allowed, DGX1) for r in range(8)]
    assert DGX1[0] == [*range(20), *range(40, 60)] and DGX1[4] == [*range(20, 40), *range(60, 80)]
    assert shares[0] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # 4 ranks share socket 0's 40 CPUs
    assert shares[3] == [*range(50, 60)]
    assert shares[5] == [30, 31, 32, 33, 34, 35, 36, 37, 38, 39]
    assert all(set(shares[r]) <= set(DGX1[r]) for r in range(8))
    assert len({cpu for share in shares for cpu in share}) == 80  # disjoint, nothing left out


def test_without_gpus_the_allowed_cpus_are_shared_and_never_empty() -> None:
    assert rank_cpus(1, 2, [4, 5, 6, 7], []) == [6, 7]
    # the sandbox: a node container with one CPU, two ranks
    assert rank_cpus(0, 2, [3], []) == rank_cpus(1, 2, [3], []) == [3]


def test_gpus_are_found_in_pci_order_with_their_local_cpus(tmp_path: Path) -> None:
    for address, vendor, klass, cpus in [
        ("0000:3b:00.0", "0x10de", "0x030200", "20-39"),
        ("0000:18:00.0", "0x10de", "0x030200", "0-19"),
        ("0000:17:00.0", "0x15b3", "0x020700", "0-19"),  # a ConnectX HCA: not a GPU
    ]:
        device = tmp_path / address
        device.mkdir()
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(klass + "\n")
        (device / "local_cpulist").write_text(cpus + "\n")
    assert gpu_cpu_lists(tmp_path) == [list(range(20)), list(range(20, 40))]


def test_the_wrapper_binds_and_then_runs_the_rank(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    env = {
        **os.environ,
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    }
    probe = "import os; print(sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'])"
    done = subprocess.run(
        [sys.executable, str(PAYLOAD / "bind.py"), "--", sys.executable, "-c", probe],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    )  # fmt: skip
    # one rank on this machine (no NVIDIA GPU here): every allowed CPU, as many threads
    assert done.stdout.splitlines()[-1] == f"{allowed} {len(allowed)}"
    assert done.stdout.startswith("bind: rank 0 (local 0) on CPUs ")
