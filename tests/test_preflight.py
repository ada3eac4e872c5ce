"""`run --preflight`, the pure half: which collective runs (nccl-tests on GPUs, allreduce on CPUs, with the
model run's nodes and framework) and when its record refuses the model run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clusterctl.cli import main
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.results.record import RunRecord
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import plan_run
from clusterctl.run.preflight import PreflightRefused, preflight_plans, refusal
from clusterctl.workloads import get_workload
from tests.fixtures import fixture_text
from tests.helpers.baselines import INVENTORIES, NCCL_TESTS


@pytest.fixture(scope="module")
def sandbox() -> Inventory:
    return load_inventory(INVENTORIES / "sandbox-example.yml")


@pytest.fixture(scope="module")
def h100() -> Inventory:
    return load_inventory(INVENTORIES / "modern-h100.yml")


def test_cpu_runs_check_the_allreduce_over_their_own_framework(sandbox: Inventory) -> None:
    plan = plan_run(sandbox, "resnet50", nodes=2, framework="ddp", batch_size=4)
    [check] = preflight_plans(sandbox, plan)
    assert check.options.workload == "allreduce"
    assert check.hosts == plan.hosts and check.options.settings == plan.options.settings
    assert "--framework=ddp" in check.rank_argv


def test_gpu_runs_check_nccl_tests_and_refuse_an_image_without_it(h100: Inventory) -> None:
    plan = plan_run(h100, "resnet50", nodes=2)
    assert [p.options.workload for p in preflight_plans(h100, plan)] == ["nccl-tests"]
    no_tests = h100.model_copy(
        update={
            "image": h100.image.model_copy(
                update={"versions": h100.image.versions.model_copy(update={"nccl_tests": None})}
            )
        }
    )
    with pytest.raises(InputError, match="nccl-tests"):
        preflight_plans(no_tests, plan)


def _collective(h100: Inventory, log: str, exit_code: int = 0) -> RunRecord:
    [plan] = preflight_plans(h100, plan_run(h100, "resnet50", nodes=2))
    return judge_run(
        h100, plan, get_workload("nccl-tests"), log, exit_code, run_id="pre", started_at=datetime.now(UTC)
    )


def test_a_bus_bandwidth_below_the_minimum_refuses_the_model_run(h100: Inventory) -> None:
    record = _collective(h100, fixture_text(NCCL_TESTS))
    busbw = record.metrics["bus_bandwidth_at_max_size"].value
    assert refusal(record, None) is None
    assert refusal(record, busbw * 0.9) is None
    reason = refusal(record, busbw * 1.1)
    assert reason and f"{busbw:.3g} GB/s is below" in reason and "not started" in reason
    assert issubclass(PreflightRefused, Exception) and PreflightRefused("x").exit_code == 1


def test_a_failed_collective_refuses_even_without_a_minimum(h100: Inventory) -> None:
    record = _collective(h100, "mpirun: no container\n", exit_code=1)
    reason = refusal(record, None)
    assert reason and "failed" in reason and "pre" in reason


def test_dry_run_with_preflight_prints_the_collective_then_the_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = str(INVENTORIES / "sandbox-example.yml")
    assert main(["run", "resnet50", "-i", inventory, "--preflight", "--dry-run"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("mpirun ") and "allreduce_bench.py --framework=horovod" in first
    assert "resnet50_bench.py" in second
