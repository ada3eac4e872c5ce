"""FSDP's collectives in the preflight: nccl-tests' all_gather_perf and reduce_scatter_perf parsed from
real captured outputs, the CPU benchmark's bus factors, the preflight's choice of collectives for an
FSDP run, and the prediction made from the all-gather's and the reduce-scatter's bus bandwidth."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.inventory import load_inventory
from clusterctl.results.predict import bus_bandwidth_at, effective_bus_bandwidth, predict_throughput
from clusterctl.results.record import RunConfig, RunRecord
from clusterctl.results.report import build_report
from clusterctl.run.plan import plan_run, run_options
from clusterctl.run.preflight import preflight_plans
from clusterctl.workloads import get_workload
from clusterctl.workloads.base import Volume
from clusterctl.workloads.gpt_arith import GptShape
from tests.fixtures import fixture_text
from tests.helpers.payloads import load_payload
from tests.helpers.records import record

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = load_inventory(ROOT / "inventories" / "sandbox-example.yml")
H100 = load_inventory(ROOT / "inventories" / "modern-h100.yml")
ALL_GATHER = "nccl_tests/nccl-issue1435-2gpu-all_gather_perf-bfloat16-partial.txt"
ALL_GATHER_OLD = "nccl_tests/nccl-tests-issue37-8xv100-all_gather_perf-old-format-out-of-bounds.txt"
REDUCE_SCATTER = "nccl_tests/nccl-tests-issue128-2node-8gpu-reduce_scatter_perf-partial.txt"

bench = load_payload("allreduce_bench")


def test_all_gather_perf_rows_carry_nccl_tests_allgather_bus_factor() -> None:
    parsed = parse_nccl_tests(fixture_text(ALL_GATHER))
    assert not parsed.unparsed_lines and len(parsed.rows) == 7
    first = parsed.rows[0]
    assert (first.size, first.count, first.type, first.redop, first.root) == (
        16777216,
        4194304,
        "bfloat16",
        "none",
        -1,
    )
    for row in parsed.rows:  # 2 GPUs: busbw = algbw x (n-1)/n = algbw / 2
        assert row.algbw is not None and row.busbw == pytest.approx(row.algbw / 2, abs=0.01)
    curve = get_workload("nccl-tests").bus_bandwidth_by_size(fixture_text(ALL_GATHER))
    assert curve[67108864] == 114.79


def test_an_old_all_gather_perf_with_wrong_values_is_read_and_refused() -> None:
    text = fixture_text(ALL_GATHER_OLD)
    parsed = parse_nccl_tests(text)  # no '#' before its legend and summaries, as posted
    assert not parsed.unparsed_lines
    assert [r.size for r in parsed.rows] == [4294967296] and parsed.rows[0].busbw == 129.05
    assert (parsed.out_of_bounds, parsed.out_of_bounds_ok, parsed.avg_bus_bandwidth_gb_per_s) == (
        2,
        False,
        128.942,
    )
    plan = plan_run(H100, "nccl-tests", nodes=1, collective="allgather")
    assert [f.code for f in get_workload("nccl-tests").sanity(text, plan)] == ["nccl-out-of-bounds"]


def test_reduce_scatter_perf_rows_including_its_empty_sizes() -> None:
    parsed = parse_nccl_tests(fixture_text(REDUCE_SCATTER))
    assert not parsed.unparsed_lines
    assert [r.size for r in parsed.rows] == [0, 0, 0, 0, 0, 128, 256]
    assert {r.redop for r in parsed.rows} == {"sum"} and parsed.rows[-1].busbw == 0.01


def test_the_cpu_benchmark_uses_nccl_tests_bus_factors() -> None:
    # doc/PERFORMANCE.md of NVIDIA/nccl-tests: 2(n-1)/n for an allreduce, (n-1)/n for allgather and
    # reducescatter; 1 GB in 1 s on 4 ranks.
    assert bench.bus_bandwidth(10**9, 1.0, 4) == (1.0, 1.5)
    assert bench.bus_bandwidth(10**9, 1.0, 4, "allgather") == (1.0, 0.75)
    assert bench.bus_bandwidth(10**9, 1.0, 4, "reducescatter") == (1.0, 0.75)


def test_nccl_tests_runs_the_binary_of_the_collective_and_counts_half_its_array() -> None:
    nccl = get_workload("nccl-tests")
    volumes: dict[str, Volume] = {}
    for op, binary in [("allreduce", "all_reduce_perf"), ("allgather", "all_gather_perf"),
                       ("reducescatter", "reduce_scatter_perf")]:  # fmt: skip
        settings = run_options(H100, "nccl-tests", collective=op).settings
        assert nccl.argv(settings, gpu=True)[0] == f"/opt/nccl-tests/build/{binary}"
        volume = nccl.allreduce_volume(settings)
        assert volume is not None
        volumes[op] = volume
        fields = nccl.config_fields(settings)
        assert fields == ({} if op == "allreduce" else {"collective": op, "model": binary})
    assert volumes["allgather"].bytes == volumes["reducescatter"].bytes == volumes["allreduce"].bytes // 2
    assert volumes["allgather"].derivation.endswith("(allgather: (n-1)/n of the array per node)")


def test_an_fsdp_preflight_measures_the_all_gather_then_the_reduce_scatter() -> None:
    fsdp = plan_run(SANDBOX, "gpt", nodes=2, framework="fsdp", model_size="tiny", seq_len=32)
    cpu = preflight_plans(SANDBOX, fsdp)
    assert [p.options.settings.collective for p in cpu] == ["allgather", "reducescatter"]
    assert ["--op=allgather" in p.rank_argv and "--framework=ddp" in p.rank_argv for p in cpu] == [
        True,
        False,
    ]
    assert "--op=reducescatter" in cpu[1].rank_argv
    gpu = preflight_plans(
        H100, plan_run(H100, "gpt", nodes=2, framework="fsdp", model_size="tiny", batch_size=8)
    )
    assert [Path(p.rank_argv[0]).name for p in gpu] == ["all_gather_perf", "reduce_scatter_perf"]
    ddp = preflight_plans(SANDBOX, plan_run(SANDBOX, "gpt", nodes=2, framework="ddp", model_size="tiny"))
    assert [p.options.settings.collective for p in ddp] == ["allreduce"]


def test_dry_run_prints_both_collectives_before_the_fsdp_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "gpt", "-i", str(ROOT / "inventories" / "sandbox-example.yml"), "--framework", "fsdp",
            "--model-size", "tiny", "--preflight", "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    commands = capsys.readouterr().out.splitlines()
    assert len(commands) == 3
    tails = [shlex.split(c)[shlex.split(c).index("--") + 1 :] for c in commands]
    assert tails[0][1:] == ["/opt/clusterctl/payload/allreduce_bench.py", "--framework=ddp", "--op=allgather"]
    assert tails[1][1:] == [
        "/opt/clusterctl/payload/allreduce_bench.py",
        "--framework=ddp",
        "--op=reducescatter",
    ]
    assert tails[2][1] == "/opt/clusterctl/payload/gpt_bench.py"


def test_op_is_refused_off_the_collectives(capsys: pytest.CaptureFixture[str]) -> None:
    inventory = str(ROOT / "inventories" / "sandbox-example.yml")
    assert main(["run", "gpt", "-i", inventory, "--framework", "ddp", "--op", "allgather", "--dry-run"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--op: the gpt workload does not read it" in err and "Traceback" not in err
    assert main(["run", "allreduce", "-i", inventory, "--op", "broadcast", "--dry-run"]) == 2
    assert "--collective 'broadcast'" in " ".join(capsys.readouterr().err.split())


GPT = RunConfig(
    workload="gpt", model="gpt", framework="fsdp", precision="fp32", batch_size=2, image_size=224,
    image_profile="cpu", device="cpu", model_size="tiny", seq_len=32,
)  # fmt: skip
SHAPE = GptShape.named("tiny", 32)


def _gpt(run_id: str, devices: int, value: float) -> RunRecord:
    run = record(run_id, devices, value, config=GPT)
    run.nodes, run.gradient_bytes = devices, SHAPE.fsdp_equivalent_bytes("fp32")
    return run


def _collective(run_id: str, op: str | None, busbw: float) -> RunRecord:
    config = GPT.model_copy(
        update={"workload": "allreduce", "model": op or "allreduce", "collective": op, "model_size": None,
                "seq_len": None}
    )  # fmt: skip
    run = record(run_id, 2, busbw, config=config)
    run.nodes = 2
    run.bus_bandwidth = {1 << 20: busbw / 2, 64 << 20: busbw}
    return run


def test_the_fsdp_prediction_weighs_the_all_gather_and_the_reduce_scatter_by_their_bytes() -> None:
    runs = [_gpt("a", 1, 4000.0), _gpt("b", 2, 5000.0), _collective("c", "allgather", 0.4),
            _collective("d", "reducescatter", 0.1), _collective("e", None, 9.0)]  # fmt: skip
    [two] = [r for r in build_report(runs, []) if r.config.workload == "gpt" and r.devices == 2]
    messages = SHAPE.fsdp_block_messages("fp32")
    assert messages == {
        "allgather": 4 * SHAPE.block_parameters // 2,
        "reducescatter": 4 * SHAPE.block_parameters // 2,
    }
    # One block's message (0.8 MB) on the curve: log2-interpolated between 1 MiB's and 64 MiB's, or below.
    at = {op: (0.4 if op == "allgather" else 0.1) / 2 for op in messages}
    split = SHAPE.fsdp_split("fp32")
    effective = effective_bus_bandwidth([(split[op], at[op]) for op in split])
    assert two.predicted == predict_throughput(
        single_device=4000.0, batch_size=64, devices=2, gradient_bytes=SHAPE.fsdp_equivalent_bytes("fp32"),
        bus_bandwidth_gb_s=effective, fused=messages["allgather"], by_collective=at,
    )  # fmt: skip
    # Its time is each collective's (n-1)/n of its bytes at its own bus bandwidth: the allreduce (9 GB/s) unused.
    expected = sum(split[op] / 2 / (at[op] * 1e9) for op in split)
    assert two.predicted is not None and two.predicted.allreduce_s == pytest.approx(expected)


def test_without_both_collectives_fsdp_falls_back_to_the_allreduce() -> None:
    runs = [_gpt("a", 1, 4000.0), _gpt("b", 2, 5000.0), _collective("c", "allgather", 0.4),
            _collective("e", None, 9.0)]  # fmt: skip
    [two] = [r for r in build_report(runs, []) if r.config.workload == "gpt" and r.devices == 2]
    assert two.predicted is not None and two.predicted.by_collective == {}
    fused = two.predicted.fused_bytes
    assert fused is not None and two.predicted.bus_bandwidth_gb_s == bus_bandwidth_at(
        {1 << 20: 4.5, 64 << 20: 9.0}, fused
    )
    with pytest.raises(ValueError, match="positive"):
        effective_bus_bandwidth([(10, 0.0)])
