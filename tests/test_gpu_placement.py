"""One GPU per rank, on its CPUs' socket: the payload's choice (payload/ranks.py) over the environment
srun gives each task, and the judge's refusal of a placement no run may have (run/judge.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterctl.run.judge import placement_findings

PAYLOAD = Path(__file__).resolve().parents[1] / "clusterctl" / "payload"
sys.path.insert(0, str(PAYLOAD))  # the payload imports its siblings from its own directory, as in the image

from ranks import (  # type: ignore[import-not-found]  # noqa: E402  (the payload's top-level names, as in the image)
    GpuChoiceError,
    choose_gpu,
    gpu_choice,
    placement_line,
    socket_distribution,
    tasks_on_node,
)


@dataclass(frozen=True)
class Task:
    """One task of a step as srun starts it on a node: its environment and the CPUs it is bound to."""

    env: dict[str, str]
    cpus: list[int]
    socket: int


def srun_tasks(
    sockets: int, cores_per_socket: int, gpus: int, ntasks: int, distribution: str | None
) -> list[Task]:
    """The tasks of ``srun -n ntasks --cpus-per-task=<equal share> --cpu-bind=cores --gpu-bind=closest``
    on one node, laid out as srun(1) --distribution documents the second level: ``block`` fills a socket's
    cores before the next socket's, ``cyclic`` (the default; ``fcyclic`` alike for whole-socket tasks)
    takes consecutive tasks from alternate sockets, a task's CPUs all on one socket. gres.conf puts GPU
    ``g`` on socket ``g // (gpus / sockets)``; ``closest`` leaves each task its socket's GPUs (global
    indices: no ConstrainDevices renumbering)."""
    per_task = sockets * cores_per_socket // ntasks
    second = socket_distribution(distribution)
    next_core = [0] * sockets
    tasks = []
    for local in range(ntasks):
        if second == "block":
            socket = next(s for s in range(sockets) if next_core[s] + per_task <= cores_per_socket)
        else:
            socket = local % sockets
        first = socket * cores_per_socket + next_core[socket]
        next_core[socket] += per_task
        near = [g for g in range(gpus) if g // (gpus // sockets) == socket]
        env = {
            "SLURM_LOCALID": str(local),
            "SLURM_NODEID": "0",
            "SLURM_STEP_ID": "0",
            "SLURM_STEP_TASKS_PER_NODE": f"{ntasks}(x2)",
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, near)),
            "CLUSTERCTL_GPUS_PER_NODE": str(gpus),
        }
        if distribution is not None:
            env["SLURM_DISTRIBUTION"] = distribution
        tasks.append(Task(env, list(range(first, first + per_task)), socket))
    return tasks


GPU_SOCKET_OF_8 = {g: g // 4 for g in range(8)}  # 2 sockets x 4 GPUs


@pytest.mark.parametrize(
    "distribution", [None, "block", "block:cyclic", "block:block", "cyclic", "cyclic:block", "block:fcyclic"]
)
def test_eight_ranks_on_two_sockets_of_four_gpus_each_take_their_own_gpu_on_their_socket(
    distribution: str | None,
) -> None:
    tasks = srun_tasks(sockets=2, cores_per_socket=56, gpus=8, ntasks=8, distribution=distribution)
    used = []
    for task in tasks:
        choice = gpu_choice(task.env, int(task.env["SLURM_LOCALID"]), cuda_devices=0)
        assert choice is not None
        gpu = int(choice.gpu)
        assert GPU_SOCKET_OF_8[gpu] == task.socket, (task, choice)  # the CPUs' socket's GPU
        assert choice.visible[choice.index] == choice.gpu  # torch's cuda:<index> is that GPU
        used.append(gpu)
    assert sorted(used) == list(range(8)), used  # every GPU once


def test_the_old_rule_sent_two_ranks_to_one_gpu_under_srun_s_default() -> None:
    # local rank modulo the GPUs a task sees: the 0,5,2,7,0,5,2,7
    tasks = srun_tasks(sockets=2, cores_per_socket=56, gpus=8, ntasks=8, distribution=None)
    old = [t.env["CUDA_VISIBLE_DEVICES"].split(",")[int(t.env["SLURM_LOCALID"]) % 4] for t in tasks]
    assert old == ["0", "5", "2", "7", "0", "5", "2", "7"]


def test_the_gpu_shaped_sandbox_gives_each_of_two_ranks_a_socket_and_its_first_gpu() -> None:
    # 2 sockets x 1 core, 4 GPUs: srun -n2 --gpu-bind=closest --cpu-bind=cores, as tried by hand
    tasks = srun_tasks(sockets=2, cores_per_socket=1, gpus=4, ntasks=2, distribution=None)
    assert [(t.cpus, t.env["CUDA_VISIBLE_DEVICES"]) for t in tasks] == [([0], "0,1"), ([1], "2,3")]
    chosen = [gpu_choice(t.env, i, 0) for i, t in enumerate(tasks)]
    assert [c.gpu for c in chosen if c] == ["0", "2"]


def test_more_ranks_than_a_sockets_gpus_is_refused_before_training() -> None:
    tasks = srun_tasks(sockets=2, cores_per_socket=6, gpus=4, ntasks=6, distribution=None)
    with pytest.raises(GpuChoiceError, match=r"would share a GPU.*--ranks-per-node"):
        for i, task in enumerate(tasks):
            gpu_choice(task.env, i, 0)


def test_without_binding_every_rank_takes_its_local_rank() -> None:
    # mpirun (ssh launcher) on a GPU node: no CUDA_VISIBLE_DEVICES, torch sees all 4
    env = {"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    assert [gpu_choice(env, r, 4).index for r in range(4)] == [0, 1, 2, 3]
    with pytest.raises(GpuChoiceError):
        gpu_choice({"OMPI_COMM_WORLD_LOCAL_SIZE": "5"}, 4, 4)
    # a CPU rank no GPU was declared for has no placement
    assert gpu_choice({}, 0, 0) is None and gpu_choice({"CUDA_VISIBLE_DEVICES": ""}, 0, 0) is None


def test_slurm_layout_strings() -> None:
    assert tasks_on_node("2(x3),1", 2) == 2 and tasks_on_node("2(x3),1", 3) == 1
    assert tasks_on_node("2(x3),1", 4) is None and tasks_on_node("two", 0) is None
    assert [socket_distribution(d) for d in (None, "block", "cyclic:block,Pack", "plane=4", "block:*")] == [
        "cyclic",
        "cyclic",
        "block",
        "cyclic",
        "cyclic",
    ]
    assert choose_gpu(3, 4, ["2", "3"], 4, "block:block").gpu == "3"  # socket 1's second task


def _lines(*placements: dict[str, object]) -> str:
    return "".join(f"{i}: CLUSTERCTL_PLACEMENT {json.dumps(p)}\n" for i, p in enumerate(placements))


def test_the_judge_takes_the_payloads_own_lines_and_passes_distinct_near_gpus() -> None:
    tasks = srun_tasks(sockets=2, cores_per_socket=1, gpus=4, ntasks=2, distribution=None)
    output = ""
    for node in ("node1", "node2"):
        for i, task in enumerate(tasks):
            env = {**task.env, "SLURMD_NODENAME": node}
            choice = gpu_choice(env, i, 0)
            assert choice is not None
            output += f"{i}: {placement_line(env, i, i, choice, task.cpus, None)}\n"
    assert output.count("CLUSTERCTL_PLACEMENT") == 4
    assert placement_findings(output) == []


def test_the_judge_refuses_two_ranks_on_one_gpu_and_a_gpu_off_the_ranks_socket() -> None:
    output = _lines(
        {"rank": 0, "node": "node1", "gpu": "0", "near": ["0", "1"], "cpus": [0]},
        {"rank": 1, "node": "node1", "gpu": "0", "near": ["0", "1"], "cpus": [0]},
        {"rank": 2, "node": "node2", "gpu": "0", "near": ["0", "1"], "cpus": [0]},  # another node: fine
        {"rank": 3, "node": "node2", "gpu": "1", "near": ["2", "3"], "cpus": [1]},
    )
    findings = {(f.code, f.node): f for f in placement_findings(output)}
    assert set(findings) == {("gpu-shared", "node1"), ("gpu-far", "node2")}
    assert findings["gpu-shared", "node1"].message == "ranks 0, 1 on node1 all use GPU 0"
    assert "rank 3 on node2 uses GPU 1" in findings["gpu-far", "node2"].message
    # the same GPU index on two nodes, or a UUID that tells two GPUs apart, is no sharing
    distinct = _lines(
        {"rank": 0, "node": "n1", "gpu": "0", "uuid": "GPU-a", "near": None, "cpus": [0]},
        {"rank": 1, "node": "n1", "gpu": "0", "uuid": "GPU-b", "near": None, "cpus": [1]},
    )
    assert placement_findings(distinct) == []


def test_a_placement_line_glued_after_another_ranks_line_is_still_judged() -> None:
    # mpirun's --tag-output forwarded rank 1's line without its newline: rank 0's placement follows on
    # the same line. Both ranks on GPU 0 of node1 must still be seen sharing it.
    one = {"rank": 1, "node": "node1", "gpu": "0", "near": ["0", "1"], "cpus": [0]}
    zero = {"rank": 0, "node": "node1", "gpu": "0", "near": ["0", "1"], "cpus": [0]}
    output = (
        f"[1,1]<stdout>:CLUSTERCTL_PLACEMENT {json.dumps(one)}"
        f"[1,0]<stdout>:CLUSTERCTL_PLACEMENT {json.dumps(zero)}\n"
    )
    assert [f.code for f in placement_findings(output)] == ["gpu-shared"]
