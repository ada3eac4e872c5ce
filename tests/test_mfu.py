"""Model FLOPs utilisation: the FLOPs count against published figures and the payload's own model, the
peak table (sourced, matched by the inventories' GPU names), the peak line parser, and the arithmetic."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from rich.console import Console

from clusterctl.inventory import load_inventory
from clusterctl.results.mfu import model_flops
from clusterctl.results.peaks import find_peak, load_peaks
from clusterctl.results.record import RunRecord
from clusterctl.results.report import build_report
from clusterctl.results.report_table import print_report
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.compute import ComputeFacts, MeasuredPeak, parse_peak_lines
from clusterctl.workloads.flops import resnet50_forward_macs, training_flops
from tests.fixtures import fixture_text
from tests.helpers.judged import paper_record
from tests.helpers.records import record
from tests.helpers.resnet50_payload import bench

ROOT = Path(__file__).resolve().parents[1]
PEAKS = load_peaks()
# torchvision's table: ResNet50_Weights.IMAGENET1K_V1, "GFLOPS 4.09" (multiply-accumulates) at 224x224.
TORCHVISION_GMACS_224 = 4.09
# timm's model card for resnet50.tv2_in1k (torchvision's ResNet-50 trained at 176x176): "GMACs: 2.6".
TIMM_GMACS_176 = 2.6
# He et al. 2015, Table 1: ResNet-50 (v1, stride on the 1x1) "3.8 x 10^9" FLOPs (multiply-adds).
PAPER_V1_GMACS_224 = 3.8


def _payload_macs(image_size: int) -> int:
    """The payload's own ResNet-50 counted by hooks on every convolution and linear layer it runs."""
    model = bench.ResNet50().eval()
    total = 0

    def count(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, torch.nn.Conv2d):
            kh, kw = module.kernel_size
            total += output.numel() * module.in_channels * kh * kw // module.groups
        else:
            assert isinstance(module, torch.nn.Linear)
            total += output.numel() * module.in_features

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d | torch.nn.Linear):
            module.register_forward_hook(count)
    with torch.no_grad():
        model(torch.zeros(1, 3, image_size, image_size))
    return total


def test_forward_macs_at_224_are_torchvision_published_figure() -> None:
    macs = resnet50_forward_macs(224)
    assert macs == 4_089_184_256
    assert macs / 1e9 == pytest.approx(TORCHVISION_GMACS_224, rel=0.02)
    assert training_flops(macs) == pytest.approx(6 * macs)  # 2 FLOPs per MAC, 3 passes
    assert training_flops(macs) / 1e9 == pytest.approx(24.5, abs=0.05)


def test_forward_macs_scale_with_the_image_area() -> None:
    assert resnet50_forward_macs(176) / 1e9 == pytest.approx(TIMM_GMACS_176, abs=0.05)
    # Convolutions scale with the output area; only the classifier does not.
    ratio = resnet50_forward_macs(448) / resnet50_forward_macs(224)
    assert ratio == pytest.approx(4, rel=0.01)
    assert resnet50_forward_macs(224) / resnet50_forward_macs(112) == pytest.approx(4, rel=0.06)


def test_v1_layout_is_the_papers_figure_and_cheaper_than_v1_5() -> None:
    v1 = resnet50_forward_macs(224, num_classes=1001, stride_on_3x3=False)
    assert v1 / 1e9 == pytest.approx(PAPER_V1_GMACS_224, rel=0.02)
    assert v1 < resnet50_forward_macs(224)


@pytest.mark.parametrize("image_size", [32, 97, 224])
def test_the_count_is_the_payload_models_own(image_size: int) -> None:
    assert resnet50_forward_macs(image_size) == _payload_macs(image_size)


def test_every_peak_is_sourced_and_named_once() -> None:
    assert len({p.name for p in PEAKS}) == len(PEAKS)
    for peak in PEAKS:
        assert "http" in peak.source, peak.name
        assert all(value > 0 for value in peak.tflops.values())
        # Tensor cores: a half-precision peak above fp32's wherever both are listed.
        assert peak.tflops.get("fp16", peak.tflops["fp32"]) > peak.tflops["fp32"]


def test_inventory_gpu_models_and_nvidia_smi_names_find_one_peak() -> None:
    models = {
        gpu
        for path in sorted((ROOT / "inventories").glob("*.yml"))
        for node in load_inventory(path).nodes
        if (gpu := node.gpus.model)
    }
    assert models >= {"H100-SXM5-80GB", "V100-SXM2-16GB"}
    names = [*models, "Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    for name in names:
        assert sum(p.matches(name) for p in PEAKS) == 1, name
    found = find_peak("H100-SXM5-80GB", "tf32", PEAKS)
    assert found is not None and found[0].name == "H100-SXM5" and found[1] == 494.7
    v100 = find_peak("V100-SXM2-16GB", "fp16", PEAKS)
    assert v100 is not None and v100[1] == 125


def test_unknown_gpu_or_missing_precision_has_no_peak() -> None:
    assert find_peak("NVIDIA GeForce RTX 4090", "fp16", PEAKS) is None
    assert find_peak("gpu", "fp32", PEAKS) is None
    assert find_peak("V100-SXM2-16GB", "bf16", PEAKS) is None  # no bfloat16 before Ampere
    assert find_peak("V100-SXM2-16GB", "tf32", PEAKS) is None


def _facts(
    precision: str = "tf32", measured: MeasuredPeak | None = None, name: str | None = None
) -> ComputeFacts:
    return ComputeFacts(
        flops_per_sample=training_flops(resnet50_forward_macs(224)),
        derivation="test",
        precision=precision,
        device_name=name,
        measured_peak=measured,
    )


def test_mfu_is_achieved_over_peak_times_devices() -> None:
    # 8 H100s at 2,000 img/s each, TF32: 16,000 x 24.535 GFLOP = 392.6 TFLOP/s of 8 x 494.7.
    result = model_flops(_facts(), 16_000, 8, gpu="H100-SXM5-80GB", peaks=PEAKS)
    assert result.achieved_tflops == pytest.approx(16_000 * 24.535104 / 1000, rel=1e-6)
    assert result.peak_tflops == 494.7 and result.peak_source == "datasheet"
    assert result.mfu == pytest.approx(result.achieved_tflops / (8 * 494.7))
    assert result.peak_reference == "H100-SXM5 tf32 (peaks.yml)"
    # bf16 reads the bf16 peak: twice TF32's, so half the utilisation.
    half = model_flops(_facts("bf16"), 16_000, 8, gpu="H100-SXM5-80GB", peaks=PEAKS)
    assert half.mfu == pytest.approx(result.mfu / 2, rel=1e-3)  # type: ignore[operator]


def test_gpu_name_from_the_payload_is_the_fallback_and_unknown_gives_no_mfu() -> None:
    named = model_flops(_facts("fp16", name="Tesla V100-SXM2-16GB"), 1000, 1, gpu="gpu", peaks=PEAKS)
    assert named.peak_tflops == 125
    unknown = model_flops(_facts(), 1000, 1, gpu="gpu", peaks=PEAKS)
    assert unknown.achieved_tflops > 0
    assert (unknown.peak_tflops, unknown.peak_source, unknown.mfu) == (None, None, None)


def test_cpu_runs_divide_by_the_measured_peak() -> None:
    measured = MeasuredPeak(tflops_per_device=0.05, ranks=2, dtype="float32", threads=1)
    result = model_flops(_facts("fp32", measured), 1.0, 2, gpu=None, peaks=PEAKS)
    assert result.peak_source == "measured" and result.peak_tflops == 0.05
    assert result.mfu == pytest.approx(24.535104e-3 / 0.1, rel=1e-6)
    assert result.peak_reference == "float32 GEMM, median of 2 ranks, 1 threads"
    no_peak = model_flops(_facts("fp32"), 1.0, 2, gpu=None, peaks=PEAKS)
    assert no_peak.mfu is None


def test_peak_lines_are_read_per_rank_tagged_or_not() -> None:
    log = "\n".join(
        [
            '[1,0]<stdout>:clusterctl-peak {"dtype": "float32", "n": 512, "rank": 0, "tflops": 0.02, "threads": 2}',
            '[1,1]<stdout>:clusterctl-peak {"dtype": "float32", "n": 512, "rank": 1, "tflops": 0.04, "threads": 2}',
            'clusterctl-peak {"rank": 2, "tflops": 0.03}',
            'clusterctl-peak {"rank": 3, "tflops": NaN}',
            'clusterctl-peak {"rank": 4, "tflops": -1}',
            "clusterctl-peak {not json",
        ]
    )
    peak = parse_peak_lines(log)
    assert peak == MeasuredPeak(tflops_per_device=0.03, ranks=3, dtype="float32", threads=2)
    assert parse_peak_lines("Step 1/2: 3.0 img/s total\n") is None


def test_judging_a_real_tf_cnn_log_on_v100s_reads_the_datasheet_peak_of_its_precision() -> None:
    _, plan, record = paper_record(fixture_text("tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt"))
    flops = record.flops
    assert flops is not None and record.value is not None
    # tf_cnn_benchmarks' resnet50 is v1 at 224x224 with 1001 classes, whatever --image-size says.
    assert flops.flops_per_sample == training_flops(
        resnet50_forward_macs(224, num_classes=1001, stride_on_3x3=False)
    )
    # The paper inventory runs fp16: the V100's tensor-core peak.
    assert (flops.precision, flops.peak_tflops, flops.peak_source) == ("fp16", 125, "datasheet")
    assert flops.mfu == pytest.approx(flops.flops_per_sample * record.value / 1e12 / (125 * plan.world_size))


def test_fp32_runs_as_tf32_where_the_payload_says_so() -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    settings = run_options(inventory, "resnet50", nodes=1, image_size=160, precision="fp32").settings
    line = 'CLUSTERCTL_RESULT {"device_name": "NVIDIA H100 80GB HBM3", "tf32": true, "total_images_per_sec": 3000}'
    facts = get_workload("resnet50").compute(settings, line)
    assert facts is not None
    assert (facts.precision, facts.device_name) == ("tf32", "NVIDIA H100 80GB HBM3")
    assert facts.flops_per_sample == training_flops(resnet50_forward_macs(160))
    assert facts.measured_peak is None
    plain = get_workload("resnet50").compute(settings, line.replace("true", "false"))
    assert plain is not None and plain.precision == "fp32"


@pytest.mark.parametrize("name", ["nccl-tests", "allreduce"])
def test_collectives_have_no_flops_model(name: str) -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    settings = run_options(inventory, name, nodes=1).settings
    assert get_workload(name).compute(settings, "") is None


def _with_flops(run_id: str, devices: int, images_per_sec: float, *, valid: bool = True) -> RunRecord:
    facts = _facts("fp16")
    flops = model_flops(facts, images_per_sec, devices, gpu="V100-SXM2-16GB", peaks=PEAKS)
    return record(run_id, devices, images_per_sec, valid=valid).model_copy(update={"flops": flops})


def test_report_rows_take_the_median_mfu_of_valid_runs_and_show_it_when_wide() -> None:
    records = [
        _with_flops("a", 8, 4000.0),
        _with_flops("b", 8, 4400.0),
        _with_flops("c", 8, 4200.0),
        _with_flops("d", 8, 100.0, valid=False),
        record("e", 1, 640.0),  # an older record without `flops`
    ]
    one, eight = build_report(records, [])
    assert (one.achieved_tflops, one.mfu, one.peak_source) == (None, None, None)
    expected = 4200.0 * training_flops(resnet50_forward_macs(224)) / 1e12
    assert eight.achieved_tflops == pytest.approx(expected)
    assert eight.mfu == pytest.approx(expected / (8 * 125))
    assert (eight.peak_tflops, eight.peak_source) == (125, "datasheet")
    buffer = io.StringIO()
    print_report([one, eight], Console(file=buffer, width=80, soft_wrap=True), wide=True)
    text = buffer.getvalue()
    assert "mfu" in text and f"{expected:,.3g} TF/s {100 * expected / 1000:.1f}%" in text
