"""The payload's ResNet-50 is torchvision's: same parameter count, same output shape."""

from __future__ import annotations

import sys

import pytest
import torch

from clusterctl.workloads import resnet50
from tests.helpers.resnet50_payload import bench


def test_resnet50_has_torchvision_parameter_count() -> None:
    # The workload's count (what the proof by counters expects on the fabric) is the payload's.
    assert bench.parameter_count(bench.ResNet50(num_classes=1000)) == 25_557_032 == resnet50.PARAMETERS


def test_resnet50_forward_gives_one_logit_per_class() -> None:
    model = bench.ResNet50(num_classes=10).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 10)


def test_fp16_on_cpu_is_refused_with_a_clear_message() -> None:
    with pytest.raises(SystemExit, match="fp16 is not supported on CPU"):
        bench.autocast_dtype("fp16", torch.device("cpu"))
    assert bench.autocast_dtype("bf16", torch.device("cpu")) == torch.bfloat16


def test_horovod_missing_from_the_image_is_a_clear_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "horovod.torch", None)  # as in NGC's PyTorch images: no Horovod
    monkeypatch.setenv("CLUSTERCTL_IMAGE", "nvcr.io#nvidia/pytorch:24.01-py3")
    with pytest.raises(
        SystemExit, match=r"needs Horovod, which nvcr.io#nvidia/pytorch:24.01-py3 lacks"
    ) as info:
        bench.import_horovod()
    assert "--framework ddp" in str(info.value)
