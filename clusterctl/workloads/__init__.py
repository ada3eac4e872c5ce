"""The workloads clusterctl can run, by name."""

from __future__ import annotations

from clusterctl.errors import InputError
from clusterctl.workloads.base import Metric, Workload
from clusterctl.workloads.nccl_tests import NcclTests
from clusterctl.workloads.resnet50 import ResNet50
from clusterctl.workloads.tf_cnn_benchmarks import TfCnnBenchmarks

REGISTRY: dict[str, Workload] = {w.name: w for w in (ResNet50(), TfCnnBenchmarks(), NcclTests())}

__all__ = ["REGISTRY", "Metric", "Workload", "get_workload"]


def get_workload(name: str) -> Workload:
    """The registered workload called ``name``.

    Raises:
        InputError: no such workload; the message lists the known ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown workload {name!r}; known: {', '.join(REGISTRY)}.") from None
