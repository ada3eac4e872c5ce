"""The GPU images as built on real hosts: CUDA images cannot be built here, so the rendered Dockerfiles
are read instruction by instruction, in build order, for what makes each build work.

paper-2020: the current CUDA repository key before NVIDIA's repository is reached, cuDNN 7.6.5 and NCCL
2.5.6 pinned (a downgrade of a held package), g++-4.8 for Horovod 0.19's TF 1.14 plugin, MLNX OFED's
prerequisites. modern: one NCCL (torch's) for DDP, Horovod and nccl-tests; nccl-tests for sm_90; the
base pinned by digest. Settings that would break those rules are refused at load.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from clusterctl.errors import InventoryError
from clusterctl.image.render import render_dockerfile
from clusterctl.inventory import Inventory, validate_document
from clusterctl.inventory.profiles import CUDA_KEYRING_VERSION, PAPER_2020
from clusterctl.paths import data_dir
from clusterctl.yamlio import load_yaml

PAPER = data_dir("inventories") / "paper-c4140.yml"
MODERN = data_dir("inventories") / "modern-h100.yml"
DIGEST = "sha256:" + "0123456789abcdef" * 4

# What mlnxofedinstall checks before a user-space install (its required_debs and the dist_req_inst of
# the packages --all selects; see the comment in templates/Dockerfile.j2) and that the issue names.
MOFED_PREREQUISITES = [
    "perl",
    "lsb-release",
    "libnl-3-200",
    "libnl-route-3-200",
    "kmod",
    "lsof",
    "ethtool",
    "udev",
    "pciutils",
    "python3",
    "autotools-dev",
    "autoconf",
    "automake",
    "debhelper",
    "chrpath",
    "gfortran",
]


def _document(path: Path) -> dict[str, Any]:
    return copy.deepcopy(load_yaml(path))


def _inventory(path: Path, **image: Any) -> Inventory:
    """The example inventory at ``path``, its ``image:`` keys replaced by ``image`` and validated."""
    document = _document(path)
    document["image"] = {**document.get("image", {}), **image}
    return validate_document(document, path)


def _runs(dockerfile: str) -> list[str]:
    """Every RUN instruction's shell text, continuation lines joined, in build order."""
    runs: list[str] = []
    current: list[str] | None = None
    for line in dockerfile.splitlines():
        if current is None:
            if not line.startswith("RUN "):
                continue
            current = []
            line = line.removeprefix("RUN ")
        if line.lstrip().startswith("#"):
            continue
        current.append(line.rstrip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            runs.append(" ".join(current))
            current = None
    return runs


def _commands(run: str) -> list[str]:
    """The `&&`-joined commands of one RUN, in order."""
    return [c.strip() for c in run.split(" && ")]


def _first(runs: list[str], needle: str) -> int:
    """Index of the first RUN containing ``needle``."""
    return next(i for i, run in enumerate(runs) if needle in run)


def _installed(run: str) -> set[str]:
    """The package arguments of every apt-get install in ``run`` (flags and pins' versions stripped)."""
    names: set[str] = set()
    for command in _commands(run):
        if command.startswith("apt-get install"):
            names |= {w.strip('"').split("=")[0] for w in command.split()[2:] if not w.startswith("-")}
    return names


# --------------------------------------------------------------------------- paper-2020


def test_paper_installs_the_current_cuda_keyring_before_reaching_nvidias_repository() -> None:
    runs = _runs(render_dockerfile(_inventory(PAPER)))
    first_update = _first(runs, "apt-get update")
    commands = _commands(runs[first_update])
    # The base image's lists (signed by the retired key 7fa2af80) go before that first update...
    removal = next(
        i for i, c in enumerate(commands) if c.startswith("rm -f /etc/apt/sources.list.d/cuda.list")
    )
    assert "/etc/apt/sources.list.d/nvidia-ml.list" in commands[removal]
    assert removal < commands.index("apt-get update")
    # ... and cuda-keyring is installed in the same step, from the repository of the image's distribution.
    download = next(c for c in commands if "cuda-keyring_${CUDA_KEYRING_VERSION}_all.deb" in c)
    assert "/compute/cuda/repos/ubuntu1804/x86_64/" in download
    assert "dpkg -i /tmp/cuda-keyring.deb" in commands
    assert f"ARG CUDA_KEYRING_VERSION={CUDA_KEYRING_VERSION}" in render_dockerfile(_inventory(PAPER))


def test_keyring_repository_follows_the_image_distribution() -> None:
    text = render_dockerfile(_inventory(MODERN))
    assert "/compute/cuda/repos/ubuntu2204/x86_64/cuda-keyring_" in text


def test_paper_pins_cudnn_765_and_nccl_256_for_cuda_100_allowing_the_downgrade() -> None:
    text = render_dockerfile(_inventory(PAPER))
    assert re.search(r"^ARG CUDNN_VERSION=7\.6\.5\.32$", text, flags=re.MULTILINE)
    runs = _runs(text)
    pin = runs[_first(runs, "libcudnn7=")]
    install = next(c for c in _commands(pin) if c.startswith("apt-get install"))
    for package in ("libcudnn7", "libcudnn7-dev"):
        assert f'"{package}=${{CUDNN_VERSION}}-1+cuda10.0"' in install
    for package in ("libnccl2", "libnccl-dev"):
        assert f'"{package}=${{NCCL_VERSION}}-1+cuda10.0"' in install
    # The base image holds its own (newer) libnccl2: the pin is a downgrade of a held package.
    assert "--allow-downgrades" in install.split()
    assert "--allow-change-held-packages" in install.split()
    assert pin.index("apt-get update") < pin.index("apt-get install")


def test_paper_builds_horovod_with_the_g48_that_tf_114_was_built_with() -> None:
    runs = _runs(render_dockerfile(_inventory(PAPER)))
    horovod = _first(runs, 'pip install --no-cache-dir "horovod==${HOROVOD_VERSION}"')
    gxx = _first(runs, "g++-4.8")
    assert "g++-4.8" in _installed(runs[gxx])
    assert gxx < horovod
    # Horovod 0.19's setup.py picks g++-4.8 itself and drops the flags GCC 4.8 lacks only when CC and CXX
    # are unset; setting them would bypass both.
    assert not re.search(r"\b(CC|CXX)=", runs[horovod])
    assert "HOROVOD_WITH_TENSORFLOW=1" in runs[horovod]


def test_no_gcc_48_on_a_pytorch_image() -> None:
    assert "g++-4.8" not in render_dockerfile(_inventory(MODERN))


@pytest.mark.parametrize("path", [PAPER, MODERN], ids=["paper-2020", "modern"])
def test_mofed_prerequisites_are_installed_before_mlnxofedinstall(path: Path) -> None:
    runs = _runs(render_dockerfile(_inventory(path)))
    mofed = runs[_first(runs, "mlnxofedinstall")]
    commands = _commands(mofed)
    installer = next(i for i, c in enumerate(commands) if "mlnxofedinstall" in c)
    before = " && ".join(commands[:installer])
    assert set(MOFED_PREREQUISITES) <= _installed(before)
    # The apt lists are still there when the installer runs (it fetches the distribution-specific rest).
    assert "apt-get update" in commands[:installer]
    assert not any("/var/lib/apt/lists" in c for c in commands[:installer])
    assert "--user-space-only" in commands[installer]


def test_paper_profile_names_the_whitepapers_cudnn() -> None:
    assert PAPER_2020["versions"]["cudnn"] == "7.6.5.32"  # Table 2: cuDNN 7.6.5


# --------------------------------------------------------------------------- modern: one NCCL


def test_modern_has_one_nccl_torchs_for_ddp_horovod_and_nccl_tests() -> None:
    text = render_dockerfile(_inventory(MODERN))
    runs = _runs(text)
    assert not any("libnccl2=" in run for run in runs), "no apt NCCL next to torch's"
    link = runs[_first(runs, "import nvidia.nccl")]
    home = re.search(r'ln -s "\$\{nccl_dir\}" (\S+)', link)
    assert home, link
    nccl_home = home.group(1)
    assert f"echo {nccl_home}/lib > /etc/ld.so.conf.d/" in link
    assert "apt-get purge -y --allow-change-held-packages" in link and "libnccl" in link
    torch = _first(runs, '"torch==${TORCH_VERSION}"')
    horovod = _first(runs, "HOROVOD_WITH_PYTORCH=1")
    tests = _first(runs, "make -C /opt/nccl-tests")
    assert torch < runs.index(link) < horovod < tests
    # Horovod links NCCL statically unless told otherwise: shared, from torch's wheel.
    assert f"HOROVOD_NCCL_HOME={nccl_home}" in runs[horovod].split()
    assert "HOROVOD_NCCL_LINK=SHARED" in runs[horovod].split()
    assert f"NCCL_HOME={nccl_home}" in runs[tests].split()


def test_nccl_tests_are_compiled_for_hopper() -> None:
    text = render_dockerfile(_inventory(MODERN))
    gencode = re.search(r'^ARG NVCC_GENCODE="([^"]+)"$', text, flags=re.MULTILINE)
    assert gencode, "no NVCC_GENCODE: nccl-tests' own list stops at sm_80"
    flags = gencode.group(1).split()
    assert "-gencode=arch=compute_90,code=sm_90" in flags
    assert "-gencode=arch=compute_80,code=sm_80" in flags
    assert flags[-1] == "-gencode=arch=compute_90,code=compute_90"  # PTX for GPUs newer than the list
    runs = _runs(text)
    assert 'NVCC_GENCODE="${NVCC_GENCODE}"' in runs[_first(runs, "make -C /opt/nccl-tests")]


def test_cuda_archs_of_the_inventory_reach_nvcc() -> None:
    versions = {**_document(MODERN)["image"].get("versions", {}), "cuda_archs": "90"}
    text = render_dockerfile(_inventory(MODERN, versions=versions))
    assert (
        'ARG NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"'
        in text
    )


@pytest.mark.parametrize("archs", ["9.0", "80;rm -rf /", "sm_90", "80,,90", ""])
def test_cuda_archs_refuse_what_is_not_a_list_of_compute_capabilities(archs: str) -> None:
    with pytest.raises(InventoryError, match=r"image\.versions\.cuda_archs"):
        _inventory(MODERN, versions={"cuda_archs": archs})


@pytest.mark.parametrize("field", ["nccl", "cudnn"])
def test_a_pytorch_image_refuses_a_second_nccl_or_cudnn(field: str) -> None:
    with pytest.raises(InventoryError) as caught:
        _inventory(MODERN, versions={field: "2.23.4"})
    message = str(caught.value)
    assert str(MODERN) in message and f"image.versions.{field}" in message and "Fix:" in message


# --------------------------------------------------------------------------- base image and digest


def test_base_digest_pins_the_from_line() -> None:
    inventory = _inventory(MODERN, base_digest=DIGEST)
    assert inventory.image.from_image == f"{inventory.image.base}@{DIGEST}"
    assert inventory.image.base is not None
    assert re.search(
        rf"^FROM {re.escape(inventory.image.base)}@{DIGEST}$", render_dockerfile(inventory), re.M
    )


def test_a_base_with_its_own_digest_is_used_as_written() -> None:
    base = f"registry.example.org/mirror/cuda:10.0-devel-ubuntu18.04@{DIGEST}"
    inventory = _inventory(PAPER, base=base)
    assert re.search(rf"^FROM {re.escape(base)}$", render_dockerfile(inventory), re.M)


def test_base_points_at_a_mirror_or_a_loaded_copy() -> None:
    inventory = _inventory(PAPER, base="localhost:5000/nvidia/cuda:10.0-devel-ubuntu18.04")
    text = render_dockerfile(inventory)
    assert re.search(r"^FROM localhost:5000/nvidia/cuda:10\.0-devel-ubuntu18\.04$", text, re.M)


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:" + "0123456789ABCDEF" * 4,  # upper case: not a digest docker writes
        "sha256:" + "0" * 63,
        "md5:" + "0" * 32,
        "0123456789abcdef" * 4,  # no algorithm
        DIGEST + "; docker rm -f x",
    ],
)
def test_base_digest_is_validated_strictly(digest: str) -> None:
    with pytest.raises(InventoryError, match=r"image\.base_digest"):
        _inventory(MODERN, base_digest=digest)


def test_a_digest_is_given_in_one_place() -> None:
    with pytest.raises(InventoryError, match="digest in one place"):
        _inventory(MODERN, base=f"nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04@{DIGEST}", base_digest=DIGEST)


def test_inventory_show_and_render_print_the_pinned_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl.cli import main

    text = MODERN.read_text()
    assert "image:\n  profile: modern\n" in text
    pinned = tmp_path / "pinned.yml"
    pinned.write_text(
        text.replace("image:\n  profile: modern\n", f"image:\n  profile: modern\n  base_digest: {DIGEST}\n")
    )
    assert main(["inventory", "show", str(pinned)]) == 0
    assert f"base nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04@{DIGEST};" in capsys.readouterr().out
    assert main(["render", "dockerfile", "-i", str(pinned), "-o", str(tmp_path / "ctx")]) == 0
    assert f"@{DIGEST}, context hash" in capsys.readouterr().out


@pytest.mark.integration
def test_the_build_asks_the_builder_for_the_pinned_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`image build` makes sure of the digest-pinned reference, the one FROM names, not the bare tag, before
    anything is sent: on the real local engine, which has no image of that digest and cannot pull one
    (offline, or a registry that does not know the digest), the build stops there, naming that reference."""
    from clusterctl.errors import EnvironmentProblem
    from clusterctl.image.build import build_image
    from clusterctl.image.render import write_context

    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    inventory = _inventory(MODERN, base_digest=DIGEST)
    pinned = f"{inventory.image.base}@{DIGEST}"
    dockerfile = (write_context(inventory, tmp_path / "context").directory / "Dockerfile").read_text()
    assert re.search(rf"^FROM {re.escape(pinned)}\b", dockerfile, re.M)
    with pytest.raises(EnvironmentProblem) as caught:
        build_image(inventory)
    assert f"the base image {pinned} is not on the local Docker engine" in str(caught.value)
