"""The number a run should have reached: compute time vs allreduce time per step, with and without
overlap, from the 1-device median and the collective's bus bandwidth recorded in the same history."""

from __future__ import annotations

import pytest

from clusterctl.results.predict import bus_bandwidth_at, fused_bytes, predict_throughput
from clusterctl.results.record import RunConfig, RunRecord
from clusterctl.results.report import build_report
from clusterctl.workloads import get_workload
from clusterctl.workloads.base import Metric
from tests.fixtures import fixture_text
from tests.helpers.records import record

GRADIENTS = 25_557_032 * 4  # ResNet-50, float32
CPU = RunConfig(
    workload="resnet50", model="resnet50", framework="horovod", precision="fp32", batch_size=8,
    image_size=64, image_profile="cpu", device="cpu (1-core nodes)",
)  # fmt: skip


def test_compute_and_allreduce_time_per_step() -> None:
    # 2 ranks of batch 8 at 10 img/s each: 0.8 s of compute; 102 MB at 0.1 GB/s busbw, 2(n-1)/n = 1: 1.02 s.
    p = predict_throughput(
        single_device=10.0, batch_size=8, devices=2, gradient_bytes=GRADIENTS, bus_bandwidth_gb_s=0.1
    )
    assert p.compute_s == pytest.approx(0.8)
    assert p.allreduce_s == pytest.approx(GRADIENTS / 0.1e9)
    assert p.no_overlap == pytest.approx(16 / (0.8 + GRADIENTS / 0.1e9))
    assert p.full_overlap == pytest.approx(16 / (GRADIENTS / 0.1e9))  # communication-bound
    # 8 ranks: 2(n-1)/n = 1.75 of the gradients cross each rank's link.
    eight = predict_throughput(
        single_device=640.0, batch_size=64, devices=8, gradient_bytes=GRADIENTS, bus_bandwidth_gb_s=10.0
    )
    assert eight.allreduce_s == pytest.approx(GRADIENTS * 1.75 / 10e9)
    assert eight.full_overlap == pytest.approx(8 * 640.0)  # compute-bound: perfect scaling


def test_a_measured_compute_replaces_the_1_device_one() -> None:
    # the issue-40 quickstart: 1 device at 33.5 img/s (0.24 s a step of 8), the 2-node ranks measured at
    # 0.65 s: the band moves from 23.3-35.7 img/s (which held the 31.2 measured by coincidence) to 14.6-24.6
    one, measured = (
        predict_throughput(
            single_device=33.5, batch_size=8, devices=2, gradient_bytes=GRADIENTS, bus_bandwidth_gb_s=0.228,
            compute_s=compute,
        )
        for compute in (None, 0.65)
    )  # fmt: skip
    assert (one.compute_source, measured.compute_source) == ("single-device", "breakdown")
    assert one.compute_s == pytest.approx(8 / 33.5) and measured.compute_s == 0.65
    assert measured.allreduce_s == one.allreduce_s
    assert (round(one.no_overlap, 1), round(one.full_overlap, 1)) == (23.3, 35.7)
    assert (round(measured.no_overlap, 1), round(measured.full_overlap, 1)) == (14.6, 24.6)
    assert not one.compute_bound and measured.compute_bound


def _collective(run_id: str, busbw: float, *, framework: str = "horovod", devices: int = 2) -> RunRecord:
    config = CPU.model_copy(update={"workload": "allreduce", "model": "allreduce", "framework": framework})
    run = record(run_id, devices, 0.0, config=config)
    run.nodes = devices
    run.primary_metric = "avg_bus_bandwidth"
    run.metrics = {"bus_bandwidth_at_max_size": Metric(value=busbw, unit="GB/s")}
    return run


def _training(run_id: str, devices: int, value: float) -> RunRecord:
    run = record(run_id, devices, value, config=CPU)
    run.nodes, run.gradient_bytes = devices, GRADIENTS
    return run


def test_the_report_predicts_from_the_matching_collective_runs() -> None:
    runs = [
        _training("a", 1, 10.0),
        _training("b", 2, 14.0),
        _collective("c", 0.1),
        _collective("d", 0.3),  # median of 0.1, 0.3 and 0.2: 0.2
        _collective("e", 0.2),
        _collective("f", 50.0, framework="ddp"),  # Gloo, not Horovod's transport: ignored
        _collective("g", 50.0, devices=4),  # another world size: ignored
    ]
    rows = {(r.config.workload, r.devices): r for r in build_report(runs, [])}
    two = rows[("resnet50", 2)]
    assert two.predicted == predict_throughput(
        single_device=10.0, batch_size=8, devices=2, gradient_bytes=GRADIENTS, bus_bandwidth_gb_s=0.2
    )
    assert rows[("resnet50", 1)].predicted is None
    assert rows[("allreduce", 2)].predicted is None


def test_no_prediction_without_a_collective_run_or_a_single_device_baseline() -> None:
    alone = build_report([_training("a", 1, 10.0), _training("b", 2, 14.0)], [])
    assert all(r.predicted is None for r in alone)
    no_base = build_report([_training("b", 2, 14.0), _collective("c", 0.2)], [])
    assert all(r.predicted is None for r in no_base)


def test_bus_bandwidth_is_read_at_the_fused_size_on_the_collectives_curve() -> None:
    """A real nccl-tests curve (DeepOps, 2 x DGX A100 over HDR): at a size between two rows
    the busbw is interpolated on log2(size); below the smallest row it is that row's."""
    log = fixture_text("nccl_tests/deepops-k8s-2x-dgx-a100-8xhdr-all_reduce_perf-old-error-column.txt")
    curve = get_workload("nccl-tests").bus_bandwidth_by_size(log)
    assert curve[16 << 20] < curve[max(curve)]  # a bucket-sized message is slower than the largest
    low, high = curve[16 << 20], curve[32 << 20]
    assert bus_bandwidth_at(curve, 16 << 20) == low
    assert bus_bandwidth_at(curve, int(2**24.5)) == pytest.approx((low + high) / 2)
    assert bus_bandwidth_at(curve, 1) == curve[min(curve)] and bus_bandwidth_at({}, 1) is None
    # DDP's 25 MB bucket (bucket_cap_mb counts MiB), Horovod's 64 MiB fusion buffer, never above G.
    assert fused_bytes("ddp", 25.0, GRADIENTS) == 25 * 2**20
    assert fused_bytes("horovod", 25.0, GRADIENTS) == 64 * 2**20
    assert fused_bytes("horovod", 25.0, 10**6) == 10**6


def test_the_prediction_uses_the_fused_size_and_is_a_range_the_median_is_placed_in() -> None:
    collective = _collective("c", 5.0)  # 5 GB/s at the largest size...
    collective.bus_bandwidth = {16 << 20: 0.05, 64 << 20: 0.1, 1 << 30: 5.0}  # ...0.1 at 64 MiB
    rows = {
        (r.config.workload, r.devices): r
        for r in build_report([_training("a", 1, 10.0), _training("b", 2, 9.0), collective], [])
    }
    two = rows[("resnet50", 2)]
    assert two.predicted is not None and two.predicted.fused_bytes == 64 << 20
    assert two.predicted.bus_bandwidth_gb_s == pytest.approx(0.1)  # Horovod's fusion size, not 1 GiB
    assert not two.predicted.compute_bound
    assert two.prediction_verdict == "within"  # 9 img/s between no overlap and full overlap
    assert two.predicted.no_overlap < 9.0 < two.predicted.full_overlap


def test_compute_bound_when_the_allreduce_fits_in_the_compute() -> None:
    fast = predict_throughput(
        single_device=10.0, batch_size=8, devices=2, gradient_bytes=GRADIENTS, bus_bandwidth_gb_s=100.0
    )
    assert fast.compute_bound and fast.full_overlap == pytest.approx(20.0)
    assert fast.verdict(25.0) == "above" and fast.verdict(1.0) == "below"
