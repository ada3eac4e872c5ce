"""Plan-time refusal: a workload the inventory's image cannot run is refused when the plan is built
(exit 2 from the CLI), naming the profile that runs it; which profiles run what follows the profiles'
default versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import InputError
from clusterctl.inventory import load_inventory
from clusterctl.run.launchers.mpirun import Mpirun
from clusterctl.run.plan import run_options
from clusterctl.workloads import NAMES, get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.images import profiles_running
from clusterctl.workloads.job import Job

INVENTORIES = Path(__file__).resolve().parents[1] / "inventories"


def _plan(example: str, workload: str) -> Job:
    inventory = load_inventory(INVENTORIES / example)
    return build_job(inventory, run_options(inventory, workload), get_workload(workload))


@pytest.mark.parametrize(
    ("example", "workload", "profile", "runs_on"),
    [
        ("paper-c4140.yml", "resnet50", "paper-2020", "modern"),  # Python 2.7 + TF 1.14: no torch
        ("modern-h100.yml", "tf_cnn_benchmarks", "modern", "paper-2020"),  # no TensorFlow
        ("sandbox-example.yml", "tf_cnn_benchmarks", "cpu", "paper-2020"),
        ("paper-c4140.yml", "nccl-tests", "paper-2020", "modern"),  # no nccl-tests built
        ("sandbox-example.yml", "nccl-tests", "cpu", "modern"),  # no CUDA
    ],
)
def test_a_workload_the_image_cannot_run_is_refused_when_the_plan_is_built(
    example: str, workload: str, profile: str, runs_on: str
) -> None:
    with pytest.raises(InputError) as caught:
        _plan(example, workload)
    message = str(caught.value)
    assert example in message and "image.profile" in message
    assert f"the {profile} image" in message
    assert f"runs on the {runs_on}" in message
    assert "Fix:" in message


@pytest.mark.parametrize(
    ("example", "workload", "program", "gpu", "world"),
    [
        (
            "paper-c4140.yml",
            "tf_cnn_benchmarks",
            "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py",
            True,
            8,
        ),
        ("modern-h100.yml", "resnet50", "/opt/clusterctl/payload/resnet50_bench.py", True, 16),
        ("modern-h100.yml", "nccl-tests", "/opt/nccl-tests/build/all_reduce_perf", True, 16),
        ("sandbox-example.yml", "resnet50", "/opt/clusterctl/payload/resnet50_bench.py", False, 2),
    ],
)
def test_a_workload_the_image_runs_gets_its_plan(
    example: str, workload: str, program: str, gpu: bool, world: int
) -> None:
    """The image's profile runs the workload, and the plan is mpirun of the workload's own program on every
    device the inventory gives it (GPUs, or the sandbox's CPU ranks)."""
    inventory = load_inventory(INVENTORIES / example)
    assert inventory.image.profile in profiles_running(get_workload(workload))
    plan = _plan(example, workload)
    argv = Mpirun().command(inventory, plan)
    assert argv[0] == "mpirun" and argv[-len(plan.rank_argv) :] == plan.rank_argv
    assert program in plan.rank_argv[:2]
    assert (plan.gpu, plan.world_size) == (gpu, world)
    assert argv[argv.index("-np") + 1] == str(world)


def test_run_on_the_wrong_image_exits_2_before_printing_a_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli import main

    code = main(["run", "resnet50", "--dry-run", "-i", str(INVENTORIES / "paper-c4140.yml")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "mpirun" not in out
    assert "resnet50 runs on the modern or cpu profile" in err
    assert "run tf_cnn_benchmarks, which this image runs" in err


def test_every_workload_runs_on_some_profile_and_the_paper_image_on_the_papers_script() -> None:
    running = {name: profiles_running(get_workload(name)) for name in NAMES}
    assert all(running.values()), running
    assert running["tf_cnn_benchmarks"] == ["paper-2020"]
    assert "paper-2020" not in running["resnet50"]
    assert {"modern", "cpu"} <= set(running["resnet50"])
