"""Image profiles: the base image and software versions each profile starts from.

An inventory's ``image.versions`` overrides these key by key; ``image.base`` overrides the base (a
registry mirror, or a copy loaded with ``docker load``) and ``image.base_digest`` pins it. The defaults
are data, kept in one place, so that the template never hard-codes a version. They live in the
inventory package because loading an inventory fills its ``image:`` from them; ``image/`` and
``workloads/`` read them from here.
"""

from __future__ import annotations

import os
from typing import Any

# The whitepaper's stack (Table 2, "Current Tests", January 2020).
PAPER_2020: dict[str, Any] = {
    "base": "nvidia/cuda:10.0-devel-ubuntu18.04",
    "versions": {
        "os_base": "ubuntu18.04",
        "cuda": "10.0",
        "mofed": "4.7-3.2.9.0",
        "openmpi": "4.0.0",
        "nccl": "2.5.6",
        # Table 2's cuDNN; nvidia/cuda:10.0-devel-ubuntu18.04 has none and TF 1.14's GPU build needs cuDNN 7.
        "cudnn": "7.6.5.32",
        "framework": "tensorflow",
        "framework_version": "1.14.0",
        "horovod": "0.19.0",
        # Table 2 lists Python 2.7 for the TF 1.14 runs; tf_cnn_benchmarks' TF 1.14 branch runs on it.
        "python": "2.7",
        "tf_benchmarks_branch": "cnn_tf_v1.14_compatible",
    },
}

# A current GPU stack: CUDA 12 on Ubuntu 22.04; verbs from rdma-core unless a MOFED version is set.
MODERN: dict[str, Any] = {
    "base": "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
    "versions": {
        "os_base": "ubuntu22.04",
        "cuda": "12.4.1",
        "openmpi": "4.1.6",
        "framework": "pytorch",
        "framework_version": "2.5.1",
        "horovod": "0.28.1",
        "python": "3.10",
        "nccl_tests": "v2.13.11",
        # V100, A100, H100: nccl-tests' own list stops at sm_80, so an H100 would run JIT-compiled PTX.
        "cuda_archs": "70,80,90",
        # resnet50's GPU input pipeline (file reader, GPU JPEG decoder, random resized crop), for CUDA 12:
        # the release the suite runs on DALI's CPU backend (requirements/dali.in pins the same one;
        # tests/test_dali_cpu.py). PyPI holds its wheel itself; 1.x releases there are stubs that fetch
        # from pypi.nvidia.com at install time.
        "dali": "2.4.0",
    },
}

# The cuda-keyring package that installs NVIDIA's current CUDA repository key (3bf863cc, rotated in
# April 2022) and the repository list signed by it; images built before the rotation carry the old key.
CUDA_KEYRING_VERSION = "1.1-1"

# Environment variable naming the cpu profile's default base image (CI pre-seeds it under this name).
BASE_IMAGE_ENV = "CLUSTERCTL_BASE_IMAGE"
DEFAULT_CPU_BASE = "debian:bookworm-slim"

CPU: dict[str, Any] = {
    "base": None,  # resolved at load: $CLUSTERCTL_BASE_IMAGE or DEFAULT_CPU_BASE
    "versions": {
        "os_base": "debian12",
        "framework": "pytorch",
        "framework_version": "2.13.0",
        "horovod": "0.28.1",
        "python": "3.11",
    },
}

PROFILES: dict[str, dict[str, Any]] = {"paper-2020": PAPER_2020, "modern": MODERN, "cpu": CPU}


def default_base(profile: str) -> str | None:
    """The base image a profile starts from when the inventory names none."""
    if profile == "cpu":
        return os.environ.get(BASE_IMAGE_ENV) or DEFAULT_CPU_BASE
    return PROFILES[profile]["base"]


def apply_profile_defaults(image: Any) -> Any:
    """Return the ``image:`` mapping with the profile's base and versions filled where unset.

    Anything that is not a mapping, or names an unknown profile, is returned unchanged so that
    validation reports it with its location.
    """
    if image is None:
        image = {}
    if not isinstance(image, dict):
        return image
    profile = image.get("profile", "cpu")
    if not isinstance(profile, str) or profile not in PROFILES:
        return image
    versions = image.get("versions") or {}
    if not isinstance(versions, dict):
        return image
    return {
        **image,
        "base": image.get("base") or default_base(profile),
        "versions": {**PROFILES[profile]["versions"], **versions},
    }
