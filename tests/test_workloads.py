"""Workloads on real logs (tests/fixtures/): metrics from rank 0 only, sanity against the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.errors import InputError
from clusterctl.inventory import RunDefaults, load_inventory
from clusterctl.workloads import NAMES, get_workload
from clusterctl.workloads.job import Job
from clusterctl.workloads.nccl_tests import LARGE_BUSBW
from clusterctl.workloads.resnet50 import parse_result_line
from tests.fixtures import fixture_text
from tests.helpers.jobs import ROOT, plan_on

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(relative: str) -> str:
    """A fixture's output without its `# source:` and `# notes:` lines."""
    return "".join((FIXTURES / relative).read_text(encoding="utf-8").splitlines(keepends=True)[2:])


def paper_plan(workload: str, **overrides) -> Job:
    """A plan on the whitepaper's cluster (2 x 4 V100, the paper-2020 image: TensorFlow)."""
    return plan_on("paper-c4140.yml", workload, **overrides)


def modern_plan(workload: str, **overrides) -> Job:
    """A plan on the H100 pair (2 x 8 H100, the modern image: PyTorch and nccl-tests)."""
    return plan_on("modern-h100.yml", workload, **overrides)


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def test_registry_names_the_five_workloads() -> None:
    assert set(NAMES) == {"resnet50", "tf_cnn_benchmarks", "nccl-tests", "allreduce", "gpt"}


@pytest.mark.parametrize("name", NAMES)
def test_every_registered_name_loads_the_workload_of_that_name(name: str) -> None:
    assert get_workload(name).name == name


def test_an_unknown_workload_lists_the_known_ones() -> None:
    with pytest.raises(
        InputError, match="unknown workload 'bert'; known: resnet50, tf_cnn_benchmarks, nccl-tests"
    ):
        get_workload("bert")


def test_tf_cnn_metrics_are_rank_0s_total_on_a_real_8_gpu_log() -> None:
    log = fixture("tf_cnn_benchmarks/lambda-8xa100-sxm4-tf2.3-resnet50-fp16-replicated-nccl.txt")
    metrics = get_workload("tf_cnn_benchmarks").metrics(log)
    assert metrics["total_images_per_sec"].value == pytest.approx(7932.14)
    assert metrics["total_images_per_sec"].unit == "img/s"


def test_tf_cnn_sanity_flags_a_batch_and_world_size_that_differ_from_the_plan() -> None:
    # Single-process replicated run, batch 448/GPU: not the paper's Horovod run of 8 ranks x 256.
    log = fixture("tf_cnn_benchmarks/lambda-8xa100-sxm4-tf2.3-resnet50-fp16-replicated-nccl.txt")
    found = codes(get_workload("tf_cnn_benchmarks").sanity(log, paper_plan("tf_cnn_benchmarks")))
    assert found == ["wrong-batch-size", "wrong-world-size"]


def test_tf_cnn_sanity_flags_another_model() -> None:
    log = fixture("tf_cnn_benchmarks/kubeflow-mpi-operator-horovod-2gpu-resnet101-elided.txt")
    found = codes(get_workload("tf_cnn_benchmarks").sanity(log, paper_plan("tf_cnn_benchmarks")))
    assert "wrong-model" in found


def test_tf_cnn_sanity_accepts_a_matching_run() -> None:
    log = fixture("tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt")
    plan = paper_plan("tf_cnn_benchmarks", nodes=1, ranks_per_node=1, batch_size=64)
    assert get_workload("tf_cnn_benchmarks").sanity(log, plan) == []


def test_tf_cnn_without_a_total_is_no_result() -> None:
    assert codes(get_workload("tf_cnn_benchmarks").sanity("", paper_plan("tf_cnn_benchmarks"))) == [
        "no-result"
    ]


@pytest.mark.parametrize(
    ("name", "avg"),
    [
        ("oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt", 458.452),
        ("deepops-k8s-2x-dgx-a100-8xhdr-all_reduce_perf-old-error-column.txt", 53.7098),
    ],
)
def test_nccl_tests_metrics_on_real_logs(name: str, avg: float) -> None:
    metrics = get_workload("nccl-tests").metrics(fixture(f"nccl_tests/{name}"))
    assert metrics["avg_bus_bandwidth"].value == pytest.approx(avg)
    assert metrics["avg_bus_bandwidth"].unit == "GB/s"
    assert metrics["out_of_bounds"].value == 0


def test_nccl_tests_sanity_checks_ranks_against_the_plan() -> None:
    log = fixture("nccl_tests/oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt")
    workload = get_workload("nccl-tests")
    plan = modern_plan("nccl-tests", nodes=1)
    assert codes(workload.sanity(log, plan)) == ["wrong-world-size"]  # 16 ranks, not 8


def test_nccl_tests_that_failed_before_any_result_is_no_result() -> None:
    log = fixture("nccl_tests/nccl-tests-issue5-nccl1-8xp100-pcie-old-format-then-failure.txt")
    assert codes(get_workload("nccl-tests").sanity(log, modern_plan("nccl-tests"))) == ["no-result"]


def test_result_line_is_read_from_rank_0_only_and_survives_a_glued_tag() -> None:
    log = (
        '[1,1]<stdout>:CLUSTERCTL_RESULT {"world_size": 2, "total_images_per_sec": 1.0}\n'
        '[1,0]<stdout>:CLUSTERCTL_RESULT {"world_size": 2, "total_images_per_sec": 9.5}[1,0]<stdout>:\n'
    )
    assert parse_result_line(log) == {"world_size": 2, "total_images_per_sec": 9.5}
    assert parse_result_line("no result here\n") is None


def test_resnet50_argv_carries_the_settings() -> None:
    plan = modern_plan("resnet50", framework="ddp", data_format="NHWC", precision="fp16")
    assert {"--batch-size=256", "--precision=fp16", "--channels-last", "--compile", "--framework=ddp"} <= set(
        plan.rank_argv
    )


def test_nccl_tests_largest_message_bus_bandwidth_is_the_last_rows() -> None:
    log = fixture_text("nccl_tests/oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt")
    rows = parse_nccl_tests(log).rows
    largest = max(rows, key=lambda r: r.size)
    assert get_workload("nccl-tests").metrics(log)[LARGE_BUSBW].value == largest.busbw


def test_allreduce_runs_the_cpu_payload_over_the_training_framework() -> None:
    workload = get_workload("allreduce")
    ddp = workload.argv(RunDefaults(framework="ddp"), gpu=False)
    assert ddp == ["python", "/opt/clusterctl/payload/allreduce_bench.py", "--framework=ddp"]
    with pytest.raises(InputError, match="nccl-tests"):
        workload.argv(RunDefaults(), gpu=True)


def test_every_workload_declares_the_volume_the_proof_expects() -> None:
    """tf_cnn_benchmarks: its ResNet-50's float32 gradients every step (--use_fp16 keeps float32
    variables); nccl-tests: its sizes x 2 (in/out of place) x its timed iterations; the CPU
    allreduce: its sizes x (warm-up + timed); resnet50 as before."""
    settings = RunDefaults(warmup_steps=2, steps=10)
    tf = get_workload("tf_cnn_benchmarks").allreduce_volume(settings.model_copy(update={"precision": "fp16"}))
    assert tf is not None and tf.bytes == 25_559_081 * 4 * 12
    nccl = get_workload("nccl-tests").allreduce_volume(settings)
    assert nccl is not None and nccl.bytes == (2**31 - 8) * 2 * 20
    assert "-n 20 -w 5" in " ".join(get_workload("nccl-tests").argv(settings, gpu=True))
    cpu = get_workload("allreduce").allreduce_volume(settings)
    assert cpu is not None and cpu.bytes == (2**27 - 2**20) * 6
    resnet = get_workload("resnet50").allreduce_volume(settings)
    assert resnet is not None and resnet.bytes == 25_557_032 * 4 * 12 and "12 steps" in resnet.derivation


def test_the_cpu_allreduce_volume_matches_the_payloads_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "clusterctl" / "payload"))  # as in the image: siblings import
    import allreduce_bench  # type: ignore[import-not-found]  # the payload's top-level name, as in the image

    from clusterctl.workloads.allreduce import REPEATS, SIZES

    args = allreduce_bench.parse_args([])
    assert tuple(allreduce_bench.sizes(args.min_bytes, args.max_bytes)) == SIZES
    assert args.warmup + args.iters == REPEATS


def test_nccl_tests_records_its_bus_bandwidth_per_size() -> None:
    log = fixture("nccl_tests/oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt")
    curve = get_workload("nccl-tests").bus_bandwidth_by_size(log)
    assert curve and min(curve) == 1 << 30 and all(v > 0 for v in curve.values())
    assert get_workload("resnet50").bus_bandwidth_by_size(log) == {}


@pytest.mark.parametrize("name", ["resnet50", "gpt"])
def test_judging_a_run_parses_the_payloads_result_line_once(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judgement reads a workload's output through one ``Workload.read``: the result line is parsed
    once for the metrics, the sanity and the compute facts, not once for each."""
    from datetime import UTC, datetime

    import clusterctl.workloads.gpt as gpt_module
    import clusterctl.workloads.resnet50 as resnet50_module
    from clusterctl.run.judge import judge_run
    from clusterctl.run.plan import plan_run

    calls: list[str] = []
    original = resnet50_module.parse_result_line

    def counted(log: str) -> object:
        calls.append(log)
        return original(log)

    monkeypatch.setattr(resnet50_module, "parse_result_line", counted)
    monkeypatch.setattr(gpt_module, "parse_result_line", counted)
    inventory = load_inventory(Path(__file__).resolve().parents[1] / "inventories" / "sandbox-example.yml")
    options: dict[str, Any] = {"framework": "ddp", "model_size": "tiny", "seq_len": 32, "batch_size": 2}
    job = plan_run(inventory, name, **(options if name == "gpt" else {}))
    log = '[1,0]<stdout>:CLUSTERCTL_RESULT {"world_size": 2, "total_images_per_sec": 9.5}\n'
    judge_run(
        inventory, job, get_workload(name), log, 0, run_id="r", started_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("name", "module", "parser", "inventory_file"),
    [
        ("nccl-tests", "clusterctl.workloads.nccl_tests", "parse_nccl_tests", "modern-h100.yml"),
        ("allreduce", "clusterctl.workloads.nccl_tests", "parse_nccl_tests", "sandbox-example.yml"),
        ("tf_cnn_benchmarks", "clusterctl.workloads.tf_cnn_benchmarks", "parse_tf_cnn_benchmarks", "paper-c4140.yml"),
    ],
)  # fmt: skip
def test_judging_a_run_parses_the_workloads_output_once(
    name: str, module: str, parser: str, inventory_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    from datetime import UTC, datetime

    from clusterctl.run.judge import judge_run
    from clusterctl.run.plan import plan_run

    target = importlib.import_module(module)
    original = getattr(target, parser)
    calls: list[str] = []

    def counted(text: str) -> object:
        calls.append(text)
        return original(text)

    monkeypatch.setattr(target, parser, counted)
    inventory = load_inventory(Path(__file__).resolve().parents[1] / "inventories" / inventory_file)
    job = plan_run(inventory, name)
    judge_run(
        inventory,
        job,
        get_workload(name),
        "no output\n",
        1,
        run_id="r",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert len(calls) == 1
