"""Foundation checks on real tools: the cpu image builds on a real engine and its sshd config is
valid; a non-editable install works from outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import docker
import pytest

from clusterctl.hosts.sshkeys import ensure_keypair
from clusterctl.image.render import CONTAINER_SSH_DIR, write_context
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir

pytestmark = [pytest.mark.integration, pytest.mark.beside]
REPO = Path(__file__).resolve().parents[2]


def test_cpu_profile_builds_and_sshd_config_is_valid(tmp_path: Path) -> None:
    client = docker.from_env()
    ctx = write_context(load_inventory(data_dir("inventories") / "sandbox-example.yml"), tmp_path / "ctx")
    tag = f"clusterctl-test/foundation:{ctx.content_hash[:12]}"
    client.images.build(path=str(ctx.directory), tag=tag, rm=True, forcerm=True)
    keys = tmp_path / "keys"
    public = ensure_keypair(keys / "ssh_host_ed25519_key", "test-host")
    (keys / "authorized_keys").write_text(public + "\n")
    output = client.containers.run(
        tag,
        [
            "bash",
            "-c",
            "/usr/sbin/sshd -t && echo sshd-config-ok && python -c 'import torch, horovod.torch; print(torch.__version__)'",
        ],
        volumes={str(keys): {"bind": CONTAINER_SSH_DIR, "mode": "ro"}},
        remove=True,
    ).decode()
    assert "sshd-config-ok" in output
    assert "2.13.0" in output
    # no host key is baked into the image
    listing = client.containers.run(
        tag, ["bash", "-c", "ls /etc/ssh/ | grep -c ssh_host_ || true"], remove=True
    )
    assert listing.decode().strip() == "0"


def test_non_editable_install_renders_from_outside_the_repo(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    # Resolved from pyproject.toml's ranges as a user's install is, but held to the locked versions;
    # hashes are left out, as pip reads a hash in a constraints file as --require-hashes.
    locked = dict(
        re.findall(r"^([a-z0-9._-]+)==([^\s;\\]+)", (REPO / "requirements" / "dev.txt").read_text(), re.M)
    )
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in locked.items()))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    python = str(env_dir / "bin" / "python")
    subprocess.run(  # --no-compile: what is checked is the set installed, not its .pyc files
        [python, "-m", "pip", "install", "-q", "--no-compile", str(REPO)],
        check=True,
        cwd=tmp_path,
        timeout=900,
        env={**env, "PIP_CONSTRAINT": str(constraints)},  # the isolated build (hatchling) too
    )
    # all but clusterctl and the venv's own seed (its bundled pip and setuptools)
    listed = ["--format=freeze", "--exclude", "clusterctl", "--exclude", "pip", "--exclude", "setuptools"]
    freeze = subprocess.run(
        [python, "-m", "pip", "list", *listed],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    installed = dict(line.split("==") for line in freeze.split())
    unlocked = {
        name: version
        for name, version in installed.items()
        if locked.get(re.sub(r"[._-]+", "-", name).lower()) != version
    }
    assert not unlocked, f"installed at versions requirements/dev.txt does not lock: {unlocked}"
    assert installed.keys() >= {"typer", "pydantic", "matplotlib"}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = subprocess.run(
        [
            str(env_dir / "bin" / "clusterctl"),
            "render",
            "dockerfile",
            "-i",
            "inventories/paper-c4140.yml",
            "-o",
            "ctx",
        ],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "FROM nvidia/cuda:10.0-devel-ubuntu18.04" in (outside / "ctx" / "Dockerfile").read_text()
    # the data directories travel inside the wheel, not from the checkout
    site = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import clusterctl.paths as p; print(p.data_dir('templates'))"],
        cwd=outside, capture_output=True, text=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    assert "site-packages" in site and sys.prefix not in site
