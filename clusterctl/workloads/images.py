"""Which image can run which workload, decided when the job is built.

A workload says what it needs from an image (``Workload.image_lacks``); the image profiles that run it
are derived from the profiles' default versions (``clusterctl.inventory.profiles.PROFILES``), never listed
a second time. ``workloads.build.build_job`` calls ``check_image_runs`` first, so `run`, `sweep` and their dry
runs refuse a workload the image cannot run before anything starts.

Where the inventory's slurm block names the image the ranks run (``slurm.image``, or the nodes' own
Python with runtime ``none``), the profile says nothing of that image: the judgement waits for the
backend to be known, and `run`/`sweep` make it with ``clusterctl.workloads.image_caps.check_job_image``
(the image the job runs, by its family, before anything is submitted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.errors import InputError
from clusterctl.inventory import ImageVersions
from clusterctl.inventory.profiles import PROFILES
from clusterctl.workloads import NAMES, get_workload

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory
    from clusterctl.workloads.base import Workload


def profiles_running(workload: Workload) -> list[str]:
    """The image profiles whose default versions give an image that runs ``workload``, in PROFILES order."""
    return [
        name
        for name, profile in PROFILES.items()
        if workload.image_lacks(ImageVersions.model_validate(profile["versions"])) is None
    ]


def check_image_runs(workload: Workload, inventory: Inventory) -> None:
    """Refuse, when the plan is built, a workload that the inventory's image cannot run; nothing where the
    slurm block names the image the ranks run (the launcher is not known yet: ``check_job_image`` judges).

    Raises:
        InputError: as ``check_profile_runs``.
    """
    slurm = inventory.slurm
    if slurm is not None and (slurm.image or slurm.runtime == "none"):
        return
    check_profile_runs(workload, inventory)


def check_profile_runs(workload: Workload, inventory: Inventory) -> None:
    """Refuse a workload that the image `clusterctl image build` makes for the inventory cannot run.

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
    fits = [name for name in NAMES if get_workload(name).image_lacks(image.versions) is None]
    instead = f", or run {' or '.join(fits)}, which this image runs" if fits else ""
    raise InputError(
        f"{where}: `run {workload.name}` cannot run on the {image.profile} image: it has no {lacks}. "
        f"{workload.name} runs on the {' or '.join(runs_it)} profile. Fix: set image.profile: {runs_it[0]} "
        f"(and rebuild with `clusterctl image build`){instead}."
    )
