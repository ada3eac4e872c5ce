"""The shipped baselines: every figure has a source, the measured ones equal the peak of the captured
run they cite, the PCIe ceilings follow their formula, and the lookup picks the right one."""

from __future__ import annotations

import pytest

from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.results.baselines import find_baseline, load_baselines
from tests.fixtures import FIXTURES, fixture_text

BASELINES = load_baselines()
# The captured run each measured baseline was read from.
CITED = {
    "nccl-allreduce-8xa100-sxm4-1node": "superbench-testdata-8xa100-sxm4-single-node-g8-validation0.txt",
    "nccl-allreduce-2x8xa100-hdr-ib": "deepops-k8s-2x-dgx-a100-8xhdr-all_reduce_perf-old-error-column.txt",
    "nccl-allreduce-2x8xa100-roce": "oci-bm-gpu4-8-2node-16xa100-g8-all_reduce_perf-10G.txt",
    "nccl-allreduce-2x8xh100-roce": "oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt",
}


def test_every_baseline_is_sourced_and_names_are_unique() -> None:
    assert len({b.name for b in BASELINES}) == len(BASELINES)
    assert all(len(b.source) > 20 for b in BASELINES)


@pytest.mark.parametrize("name", sorted(CITED))
def test_measured_baselines_equal_the_peak_of_the_run_they_cite(name: str) -> None:
    [baseline] = [b for b in BASELINES if b.name == name]
    assert (FIXTURES / "nccl_tests" / CITED[name]).is_file()
    run = parse_nccl_tests(fixture_text(f"nccl_tests/{CITED[name]}"))
    assert run.peak_bus_bandwidth_gb_per_s == pytest.approx(baseline.value, abs=0.1)


def test_pcie_ceilings_follow_rate_times_lanes_times_encoding() -> None:
    rates = {3: 8, 4: 16, 5: 32}
    for b in (b for b in BASELINES if b.metric == "h2d_copy_ceiling"):
        gen, lanes = int(b.match["pcie_gen"]), int(b.match["pcie_width"])
        assert b.value == pytest.approx(rates[gen] * lanes * 128 / 130 / 8, rel=0.01)


def test_lookup_matches_gpu_models_by_substring_and_prefers_the_closest() -> None:
    config: dict[str, str | int] = {
        "gpu": "NVIDIA H100 80GB HBM3",
        "gpus_per_node": 8,
        "nodes": 2,
        "fabric": "roce",
    }
    found = find_baseline("nccl_allreduce_busbw_peak", config, BASELINES)
    assert found is not None and found.name == "nccl-allreduce-2x8xh100-roce"
    assert found.floor == pytest.approx(found.value * 0.85)
    assert find_baseline("nccl_allreduce_busbw_peak", {**config, "fabric": "infiniband"}, BASELINES) is None
    gen5 = find_baseline("h2d_copy_ceiling", {"pcie_gen": 5, "pcie_width": 16}, BASELINES)
    assert gen5 is not None and gen5.name == "pcie-gen5-x16"
