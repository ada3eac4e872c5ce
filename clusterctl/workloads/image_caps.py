"""The image the job runs is the image that is checked: what each image family holds, what a job needs,
and the refusal or the in-job check between them. Pure.

A job needs ``Piece``s: Python modules its ranks import (``torch``, ``horovod.torch``, ...) and files
they run (nccl-tests' ``all_reduce_perf``, tf_cnn_benchmarks' script); ``job_needs`` derives them from
the job (its workload, framework and rank argv). What an image provides comes from its family:
the NGC families in ``image_caps.yml`` (each with the release notes that list its contents), or, for
the image `clusterctl image build` makes, from the inventory's ``image.versions``
(``built_image_provides``). ``check_job_image`` refuses a job whose image is known to lack a piece;
an image of no known family (an apptainer ``.sif``, a site's own image, the host under runtime
``none``) gets ``image_check_step``: the batch script's first step, on one task, that checks every
piece and ends the job with one message instead of a traceback per rank.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.errors import InputError
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.yamlio import load_yaml

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, Inventory
    from clusterctl.workloads.job import Job

DEFAULT_FAMILIES = Path(__file__).with_name("image_caps.yml")
# The modules a rank imports, by workload; the payload's scripts (every other workload) import torch.
_MODULES = {"tf_cnn_benchmarks": ("tensorflow", "horovod.tensorflow")}
_PAYLOAD_MODULES = ("torch",)
# What each module is, in words, for messages.
_MODULE_NAMES = {
    "torch": "PyTorch",
    "horovod.torch": "Horovod",
    "tensorflow": "TensorFlow",
    "horovod.tensorflow": "Horovod (for TensorFlow)",
}
# What the in-job check's messages leave out, so that they sit in double quotes inside single ones.
_SHELL_SPECIAL = re.compile(r"[`$\\\"']")
# Exit status of the in-job check when a piece is missing (the run step never starts).
IMAGE_CHECK_EXIT = 3


@dataclass(frozen=True)
class Piece:
    """One thing a job needs from its image: a Python module it imports or a file it runs."""

    kind: Literal["module", "file"]
    target: str

    @property
    def label(self) -> str:
        """The piece in words: "Horovod (import horovod.torch)", "/opt/nccl-tests/build/all_reduce_perf"."""
        if self.kind == "file":
            return self.target
        return f"{_MODULE_NAMES.get(self.target, self.target)} (import {self.target})"


class ImageFamily(BaseModel):
    """An image family clusterctl knows: how to recognise its references and what its images hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The family, e.g. NGC PyTorch.")
    match: str = Field(description="Regular expression over slurm.image; group 1 is the release (YY.MM).")
    since: str = Field(pattern=r"^\d\d\.\d\d$", description="The first release this entry speaks for.")
    provides: list[str] = Field(description="Python modules and files its images hold (of those jobs need).")
    lacks: str = Field(min_length=10, description="What its images do not hold, in words, from the source.")
    source: str = Field(min_length=20, description="Where the contents are published (release notes).")

    def matches(self, image: str) -> bool:
        """Whether ``image`` is a release of this family that this entry speaks for."""
        found = re.match(self.match, image)
        return found is not None and found.group(1) >= self.since


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    families: list[ImageFamily]


@cache
def load_families(path: Path = DEFAULT_FAMILIES) -> tuple[ImageFamily, ...]:
    """The families in ``path`` (default: the shipped ``image_caps.yml``)."""
    return tuple(_File.model_validate(load_yaml(path)).families)


def find_family(image: str, families: tuple[ImageFamily, ...] | None = None) -> ImageFamily | None:
    """The family ``image`` belongs to; None: no known family (checked inside the job instead)."""
    return next((f for f in (families or load_families()) if f.matches(image)), None)


def job_needs(plan: Job) -> list[Piece]:
    """What the ranks of ``plan`` need from their image: the modules they import, the files they run.

    A rank argv that starts with an absolute path runs that file (nccl-tests' binaries); a Python
    script outside the mounted payload must be in the image (tf_cnn_benchmarks' clone). Horovod is
    needed exactly when the payload runs ``--framework=horovod``.
    """
    argv = plan.rank_argv
    pieces: list[Piece] = []
    if argv and argv[0].startswith("/"):
        return [Piece("file", argv[0])]
    modules = _MODULES.get(plan.options.workload, _PAYLOAD_MODULES)
    pieces += [Piece("module", m) for m in modules]
    script = argv[1] if len(argv) > 1 else ""
    if script.startswith("/") and not script.startswith(f"{CONTAINER_PAYLOAD_DIR}/"):
        pieces.append(Piece("file", script))
    if "--framework=horovod" in argv and modules == _PAYLOAD_MODULES:
        pieces.append(Piece("module", "horovod.torch"))
    return pieces


def built_image_provides(versions: ImageVersions) -> set[str]:
    """What the image `clusterctl image build` makes from ``versions`` holds (the Dockerfile's steps)."""
    # Imported here: the workloads' modules import this package's registry.
    from clusterctl.workloads.nccl_tests import BINARIES, BUILD_DIR
    from clusterctl.workloads.tf_cnn_benchmarks import SCRIPT

    provides: set[str] = set()
    if versions.framework == "pytorch":
        provides |= {"torch", *(["horovod.torch"] if versions.horovod else [])}
    if versions.framework == "tensorflow":
        provides |= {"tensorflow", *(["horovod.tensorflow"] if versions.horovod else [])}
    if versions.nccl_tests:
        provides |= {f"{BUILD_DIR}/{binary}" for binary in BINARIES.values()}
    if versions.tf_benchmarks_branch:
        provides.add(SCRIPT)
    return provides


@dataclass(frozen=True)
class JobImage:
    """The image a job's ranks run in and what is known of it: ``provides`` None means unknown."""

    ref: str
    family: str
    provides: frozenset[str] | None
    source: str = ""
    change: str = "use"
    """How a fix names the change of image: "use" (the built one), "set slurm.image to"."""


def built_job_image(inventory: Inventory) -> JobImage:
    """The image `clusterctl image build` makes for ``inventory`` (the ssh backend's ranks run in it)."""
    profile = inventory.image.profile
    provides = frozenset(built_image_provides(inventory.image.versions))
    return JobImage(f"the {profile} image", f"clusterctl-built {profile}", provides)


def slurm_job_image(inventory: Inventory) -> JobImage:
    """The image the slurm backend's ranks run in on ``inventory``: ``slurm.image`` (pyxis, apptainer,
    docker) or the host (runtime none); else the image `clusterctl image build` makes."""
    slurm = inventory.slurm
    change = "set slurm.image to"
    if slurm is not None and (slurm.image or slurm.runtime == "none"):
        if slurm.runtime == "none":
            return JobImage("the Python of the nodes (slurm.runtime: none)", "host", None, change=change)
        ref = slurm.image or ""
        family = find_family(ref)
        if family is None:
            return JobImage(ref, "unknown", None, change=change)
        source = f"{family.lacks} ({family.source})"
        return JobImage(ref, family.name, frozenset(family.provides), source, change=change)
    return dataclasses.replace(built_job_image(inventory), change=change)


def _fix(piece: Piece, image: JobImage) -> str:
    """What to change so that the job has ``piece``."""
    where = image.change
    if piece.target == "horovod.torch":
        return (
            f"pass --framework ddp (or set run.framework: ddp), or {where} an image with Horovod (the one "
            "clusterctl image build makes; for pyxis, enroot import dockerd://IMAGE on shared storage)"
        )
    if "nccl-tests" in piece.target:
        return (
            f"{where} an image with nccl-tests built at {piece.target.rsplit('/', 1)[0]} (as the modern "
            "profile builds it: image.versions.nccl_tests)"
        )
    if piece.target == "torch":
        return f"{where} an image with PyTorch (e.g. nvcr.io#nvidia/pytorch:24.01-py3, or the modern profile)"
    return f"{where} an image that has it (the paper-2020 profile, for tf_cnn_benchmarks)"


def check_job_image(inventory: Inventory, image: JobImage, plan: Job) -> None:
    """Refuse, before anything is submitted, a plan whose image is known to lack what its ranks need.

    ``image``: the one its ranks run in (the backend's: ``built_job_image``, ``slurm_job_image``). An image of no known family passes here: the batch script checks it (``image_check_step``).

    Raises:
        InputError: the image lacks a piece; the message names the image, its family, each missing
            piece, the source of what the family holds, and the fix.
    """
    if image.provides is None:
        return
    if not image.source:  # the built image: the profile's refusal first, which names the profile to use
        from clusterctl.workloads import get_workload
        from clusterctl.workloads.images import check_profile_runs

        check_profile_runs(get_workload(plan.options.workload), inventory)
    missing = [p for p in job_needs(plan) if p.target not in image.provides]
    if not missing:
        return
    field = "slurm.image" if image.source else "image.profile"
    where = f"{inventory.source}, field {field}" if inventory.source else f"field {field}"
    what = " and ".join(p.label for p in missing)
    known = f" Its images hold no {image.source}." if image.source else ""
    fixes = "; ".join(dict.fromkeys(_fix(p, image) for p in missing))
    raise InputError(
        f"{where}: `run {plan.options.workload}` (framework {plan.options.settings.framework}) needs "
        f"{what}, which {image.ref} ({image.family}) does not have.{known} Fix: {fixes}."
    )


def image_check_step(inventory: Inventory, plan: Job, runtime: str, image: str) -> str:
    """The batch script's image check for an image of no known family; "" for a known one.

    One task on the first node, in the job's runtime (pyxis' ``--container-image``, ``apptainer
    exec``, ``docker run``, or on the host), tries every piece the ranks need; a missing one ends the
    job at once (exit ``IMAGE_CHECK_EXIT``) with one message naming the image, the piece and the fix,
    before any rank starts.
    """
    known = slurm_job_image(inventory)
    if known.provides is not None:
        return ""
    tests = []
    for piece in job_needs(plan):
        # Module names and paths are the workloads' own constants; the message is plain words, in double
        # quotes inside the single-quoted script (nothing in it a shell would expand).
        if piece.kind == "module":
            probe = f'python -c "import {piece.target}"'
        else:  # a script python runs need only be there; a binary must be executable
            probe = f'test -{"f" if piece.target.endswith(".py") else "x"} "{piece.target}"'
        say = _SHELL_SPECIAL.sub(
            "", f"clusterctl: image {image or known.ref} lacks {piece.label}. Fix: {_fix(piece, known)}."
        )
        tests.append(f'{probe} >/dev/null 2>&1 || {{ echo "{say}"; bad=1; }}')
    inner = "bad=0; " + "; ".join(tests) + f"; [ $bad = 0 ] || exit {IMAGE_CHECK_EXIT}"
    check = ["sh", "-c", inner]
    if runtime == "pyxis":
        wrapper = [f"--container-image={image}", "--no-container-mount-home"]
    elif runtime == "apptainer":
        wrapper = ["apptainer", "exec", image]
    elif runtime == "docker":
        wrapper = ["docker", "run", "--rm", "--entrypoint=", image]
    else:
        wrapper = []
    lines = [
        "# The image is of no family clusterctl knows (clusterctl.workloads.image_caps): one task checks that",
        "# it has what the ranks need, and a missing piece ends the job here, with one message. Its script",
        "# runs in the task's own sh, so its $bad stays unexpanded here.",
        "# shellcheck disable=SC2016",
        f"srun -N 1 -n 1 --ntasks-per-node=1 --kill-on-bad-exit=1 {shlex.join([*wrapper, *check])} || {{",
        f'  echo "clusterctl: the image check failed ($?): the run does not start"; exit {IMAGE_CHECK_EXIT}',
        "}",
    ]
    return "\n".join(lines) + "\n"
