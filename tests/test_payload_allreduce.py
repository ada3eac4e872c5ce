"""The CPU collective benchmark run for real under Open MPI (2 ranks, Gloo DDP and Horovod): nccl-tests'
table, parsed by nccl-tests' parser, with its bus bandwidth definition per collective (allreduce, and
FSDP's allgather and reducescatter)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.inventory import Inventory
from clusterctl.results.record import RunRecord
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run, run_options
from clusterctl.workloads.allreduce import Allreduce
from clusterctl.workloads.build import build_job
from tests.helpers.localrun import LocalMpirun, local_inventory


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return local_inventory()


def _run(
    inventory: Inventory, tmp_path: Path, framework: str, max_bytes: int | None = None
) -> tuple[RunRecord, str]:
    """The allreduce on 2 local ranks: the default sizes (1 to 64 MiB), or up to ``max_bytes``."""
    if max_bytes is None:
        plan = plan_run(inventory, "allreduce", nodes=2, framework=framework)
    else:
        options = run_options(inventory, "allreduce", nodes=2, framework=framework)
        plan = build_job(inventory, options, Allreduce(max_bytes=max_bytes))
    [(record, directory)] = run_plans(
        run_context(inventory, [plan], launcher=LocalMpirun(), timeout_s=240, runs_dir=tmp_path)
    )
    return record, (directory / "output.log").read_text()


def _check(record: RunRecord, log: str, largest: int = 1 << 26) -> None:
    assert record.valid, (record.findings, log[-2000:])
    parsed = parse_nccl_tests(log)
    assert [row.size for row in parsed.rows] == [2**k for k in range(20, largest.bit_length())]
    assert parsed.out_of_bounds == 0 and parsed.out_of_bounds_ok
    assert parsed.ranks == 2
    for row in parsed.rows:
        assert row.error == "0"
        # a 1 MiB allreduce on a loaded 2-core machine can take 300 ms: 0.003 GB/s prints as 0.00, as
        # nccl-tests' %6.2f would; the time is the measurement, the bandwidths follow from it
        assert row.time_us is not None and row.time_us > 0
        assert row.algbw is not None and row.busbw is not None
        # nccl-tests' definitions: algbw = size / time, busbw = algbw x 2(n-1)/n (= algbw for 2 ranks)
        assert row.algbw == pytest.approx(row.size / row.time_us / 1e3, rel=0.05, abs=0.011)
        assert row.busbw == pytest.approx(row.algbw, abs=0.011)
    peak = record.metrics["peak_bus_bandwidth"]
    assert peak.unit == "GB/s" and peak.value == max(row.busbw or 0 for row in parsed.rows)


def test_ddp_gloo_allreduce_prints_nccl_tests_table(inventory: Inventory, tmp_path: Path) -> None:
    _check(*_run(inventory, tmp_path, "ddp"))  # the sizes `run allreduce` uses: 1 MiB .. 64 MiB


# Up to 4 MiB: the table and its definitions; the default curve is DDP's above (Horovod's CPU allreduce
# to 64 MiB took 57 s of a loaded 2-core machine, three times DDP's).
@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="horovod is not installed here")
def test_horovod_allreduce_prints_nccl_tests_table(inventory: Inventory, tmp_path: Path) -> None:
    _check(*_run(inventory, tmp_path, "horovod", max_bytes=1 << 22), largest=1 << 22)


# Two runs, not four: each collective once, each framework once (an mpirun start costs ~10 s here).
@pytest.mark.parametrize(("op", "framework"), [("allgather", "ddp"), ("reducescatter", "horovod")])
def test_fsdp_s_collectives_print_nccl_tests_table_with_their_bus_factor(
    inventory: Inventory, tmp_path: Path, framework: str, op: str
) -> None:
    if framework == "horovod" and importlib.util.find_spec("horovod") is None:
        pytest.skip("horovod is not installed here")
    workload = Allreduce(max_bytes=1 << 21)  # 1 and 2 MiB: the definitions, not the curve
    options = run_options(inventory, "allreduce", nodes=2, framework=framework, collective=op)
    [(record, directory)] = run_plans(
        run_context(
            inventory, [build_job(inventory, options, workload)], launcher=LocalMpirun(), timeout_s=240,
            runs_dir=tmp_path,
        )
    )  # fmt: skip
    log = (directory / "output.log").read_text()
    assert record.valid, (record.findings, log[-2000:])  # every gathered/scattered element was exact
    assert (record.config.model, record.config.collective) == (op, op)
    parsed = parse_nccl_tests(log)
    assert [row.size for row in parsed.rows] == [1 << 20, 1 << 21] and parsed.out_of_bounds == 0
    assert {row.redop for row in parsed.rows} == {"none" if op == "allgather" else "sum"}
    for row in parsed.rows:
        assert row.error == "0" and row.algbw is not None and row.busbw is not None
        # nccl-tests: busbw = algbw x (n-1)/n for an allgather or a reduce-scatter: half of it on 2 ranks
        assert row.busbw == pytest.approx(row.algbw / 2, rel=0.01, abs=1e-4)
    volume = workload.allreduce_volume(options.settings)
    assert volume.bytes == (3 << 20) * 6 // 2 and volume.derivation.endswith(f"{op}s / 2")
