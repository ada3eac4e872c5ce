"""The workloads clusterctl can run, by name, and which image profiles can run them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.errors import InputError
from clusterctl.image.profiles import PROFILES
from clusterctl.inventory import ImageVersions
from clusterctl.workloads.base import Metric, Workload
from clusterctl.workloads.nccl_tests import NcclTests
from clusterctl.workloads.resnet50 import ResNet50
from clusterctl.workloads.tf_cnn_benchmarks import TfCnnBenchmarks

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory

REGISTRY: dict[str, Workload] = {w.name: w for w in (ResNet50(), TfCnnBenchmarks(), NcclTests())}

__all__ = ["REGISTRY", "Metric", "Workload", "check_image_runs", "get_workload", "profiles_running"]


def get_workload(name: str) -> Workload:
    """The registered workload called ``name``.

    Raises:
        InputError: no such workload; the message lists the known ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown workload {name!r}; known: {', '.join(REGISTRY)}.") from None


def profiles_running(workload: Workload) -> list[str]:
    """The image profiles whose default versions give an image that runs ``workload``, in PROFILES order."""
    return [
        name
        for name, profile in PROFILES.items()
        if workload.image_lacks(ImageVersions.model_validate(profile["versions"])) is None
    ]


def check_image_runs(workload: Workload, inventory: Inventory) -> None:
    """Refuse, when the plan is built, a workload that the inventory's image cannot run.

    The image is judged by ``image.profile`` and ``image.versions`` (what `clusterctl image build`
    puts in it), also when ``container.image`` names a prebuilt image: the profile says what it holds.

    Raises:
        InputError: the image lacks what the workload needs; the message names the inventory, the
            profile, what is missing, the profiles that run the workload and the workloads this image runs.
    """
    image = inventory.image
    lacks = workload.image_lacks(image.versions)
    if lacks is None:
        return
    where = f"{inventory.source}, field image.profile" if inventory.source else "field image.profile"
    runs_it = profiles_running(workload)  # never empty: tests hold every workload to a profile that runs it
    fits = [name for name, other in REGISTRY.items() if other.image_lacks(image.versions) is None]
    instead = f", or run {' or '.join(fits)}, which this image runs" if fits else ""
    raise InputError(
        f"{where}: `run {workload.name}` cannot run on the {image.profile} image: it has no {lacks}. "
        f"{workload.name} runs on the {' or '.join(runs_it)} profile. Fix: set image.profile: {runs_it[0]} "
        f"(and rebuild with `clusterctl image build`){instead}."
    )
