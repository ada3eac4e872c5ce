"""The workloads clusterctl can run, by name.

The registry maps each name to the module and class that implement it. A workload's module (its
parsers, the image renderer) is imported when the workload is first used, so the command line can
list the names without paying for every workload at start-up.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from clusterctl.errors import InputError

if TYPE_CHECKING:
    from clusterctl.workloads.base import Workload

# name -> (module, class). The class's own ``name`` equals its key (a unit test checks every entry).
_REGISTRY: dict[str, tuple[str, str]] = {
    "resnet50": ("clusterctl.workloads.resnet50", "ResNet50"),
    "tf_cnn_benchmarks": ("clusterctl.workloads.tf_cnn_benchmarks", "TfCnnBenchmarks"),
    "nccl-tests": ("clusterctl.workloads.nccl_tests", "NcclTests"),
    "allreduce": ("clusterctl.workloads.allreduce", "Allreduce"),
    "gpt": ("clusterctl.workloads.gpt", "Gpt"),
}
NAMES: tuple[str, ...] = tuple(_REGISTRY)

__all__ = ["NAMES", "get_workload"]


@cache
def get_workload(name: str) -> Workload:
    """The registered workload called ``name`` (one stateless instance per name).

    Raises:
        InputError: no such workload; the message lists the known ones.
    """
    try:
        module, cls = _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown workload {name!r}; known: {', '.join(NAMES)}.") from None
    return getattr(import_module(module), cls)()
