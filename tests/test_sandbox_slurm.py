"""The sandbox Slurm's pure parts: slurm.conf, the Epilog, sinfo, the slurm block, the node image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterctl.inventory import load_inventory
from clusterctl.sandbox.inventory import write_inventory
from clusterctl.sandbox.nodeimage import render_context, render_slurm_context
from clusterctl.sandbox.plan import plan_cpus, plan_sandbox, plan_shaped_cpus
from clusterctl.sandbox.slurm import (
    LOGIN_MEMLOCK_KIB,
    MAKE_DEVICES,
    RUN_DIR,
    munge_key,
    parse_sinfo_nodes,
    render_epilog,
    render_gres_conf,
    render_login_limits,
    render_slurm_conf,
)
from clusterctl.sandbox.state import sandbox_files

SHELLCHECK = Path("/usr/bin/shellcheck")


def test_slurm_conf_declares_the_gpu_node_shape_and_binds_tasks() -> None:
    plan = plan_sandbox("dev-1", 3, "10.9.0.0/24")
    conf = render_slurm_conf(plan, plan_shaped_cpus([0, 1, 2, 3, 4, 5, 6], 3, 2))  # 2 CPUs each
    # two sockets of one core (one real CPU each), four GPUs as GRES; slurmd keeps the declared shape
    for i in (1, 2, 3):
        assert (
            f"NodeName=node{i} NodeAddr=10.9.0.{10 + i} Sockets=2 CoresPerSocket=1 ThreadsPerCore=1 "
            "Gres=gpu:4 State=UNKNOWN\n"
        ) in conf
    assert "GresTypes=gpu\n" in conf and "SlurmdParameters=config_overrides\n" in conf
    assert "TaskPlugin=task/affinity\n" in conf  # tasks bound to their CPUs for real
    assert "PropagateResourceLimitsExcept=MEMLOCK\n" in conf  # the login node's low memlock stays there
    assert "SlurmctldHost=node1(10.9.0.11)\n" in conf
    assert "SlurmctldParameters=enable_configless\n" in conf
    assert "ClusterName=dev_1\n" in conf
    assert "Epilog=/etc/slurm/clusterctl-epilog.sh\n" in conf
    assert "ProctrackType=proctrack/linuxproc\n" in conf
    # a cpuset that is not one CPU per declared core would bind tasks to CPUs the node lacks
    with pytest.raises(ValueError, match="not 2 CPUs"):
        render_slurm_conf(plan, plan_cpus(list(range(30)), 3))


def test_gres_conf_puts_each_sockets_gpus_on_its_core() -> None:
    gres = render_gres_conf(plan_sandbox("dev", 2, "10.9.0.0/24"))
    lines = [line for line in gres.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "NodeName=node1 Name=gpu File=/dev/nvidia[0-1] Cores=0",
        "NodeName=node1 Name=gpu File=/dev/nvidia[2-3] Cores=1",
        "NodeName=node2 Name=gpu File=/dev/nvidia[0-1] Cores=0",
        "NodeName=node2 Name=gpu File=/dev/nvidia[2-3] Cores=1",
    ]


def test_gpu_shaped_nodes_get_two_cpus_each_disjoint_while_they_last() -> None:
    assert plan_shaped_cpus(range(6), 3, 2) == plan_cpus(range(6), 3)  # 0-1, 2-3, 4-5
    shared = plan_shaped_cpus([0, 1], 2, 2)  # the 2-core machine the issue tried by hand
    assert shared.cpusets == ("0-1", "0-1") and shared.shared
    assert not plan_shaped_cpus([0, 1], 1, 2).shared
    with pytest.raises(ValueError):
        plan_shaped_cpus([0], 1, 2)


def test_device_nodes_are_made_once_with_the_nvidia_major(tmp_path: Path) -> None:
    # the script run for real with mknod replaced by a stub that records its arguments
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "mknod").write_text('#!/bin/sh\necho "$@" >>"$LOG"\n')
    (stub / "mknod").chmod(0o755)
    log = tmp_path / "log"
    script = MAKE_DEVICES.replace("/dev/nvidia", f"{tmp_path}/nvidia")
    env = {"PATH": f"{stub}:/usr/bin:/bin", "LOG": str(log)}
    (tmp_path / "nvidia1").touch()  # already there: left alone
    subprocess.run(["sh", "-c", script, "sh", "4"], check=True, env=env)
    assert log.read_text().splitlines() == [f"-m 0666 {tmp_path}/nvidia{i} c 195 {i}" for i in (0, 2, 3)]


def test_login_limits_lower_only_the_soft_memlock() -> None:
    assert f"*    soft    memlock    {LOGIN_MEMLOCK_KIB}\n" in render_login_limits()
    assert f"root soft    memlock    {LOGIN_MEMLOCK_KIB}\n" in render_login_limits()  # root: no wildcard
    assert "hard" not in render_login_limits()


def test_epilog_removes_only_the_jobs_labelled_containers(tmp_path: Path) -> None:
    epilog = render_epilog()
    assert "label=io.clusterctl.slurm-job=${SLURM_JOB_ID:?}" in epilog
    path = tmp_path / "epilog.sh"
    path.write_text(epilog)
    subprocess.run(["sh", "-n", str(path)], check=True)
    if not SHELLCHECK.is_file():
        pytest.fail(f"{SHELLCHECK} is missing: run `bash scripts/setup-env.sh`")
    checked = subprocess.run([str(SHELLCHECK), str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_sinfo_nodes() -> None:
    assert parse_sinfo_nodes("node1 idle\nnode2 down*\n\n") == {"node1": "idle", "node2": "down*"}


def test_munge_key_is_made_once_and_private(tmp_path: Path) -> None:
    key = munge_key(tmp_path / "munge.key")
    assert len(key) == 1024 and munge_key(tmp_path / "munge.key") == key
    assert (tmp_path / "munge.key").stat().st_mode & 0o777 == 0o600


def test_slurm_sandbox_inventory_has_a_slurm_block_and_keeps_ssh_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    plan = plan_sandbox("dev", 2, "10.9.0.0/24")
    files = sandbox_files()
    write_inventory(plan, files, plan_shaped_cpus([0, 1], 2, 2), slurm=True)
    slurm = load_inventory(files.inventory).slurm
    assert slurm is not None
    assert (slurm.login.address, slurm.runtime, slurm.run_dir, slurm.default) == (
        "10.9.0.11",
        "docker",
        RUN_DIR,
        False,
    )
    assert slurm.login.ssh.identity_file == str(files.private_key)
    assert slurm.gpus_per_node == 4  # the job asks for the GPU-shaped nodes' GRES
    write_inventory(plan, files, plan_cpus([0, 1], 2))
    assert load_inventory(files.inventory).slurm is None


def test_slurm_node_image_is_a_layer_on_the_node_image() -> None:
    base = render_context("debian:bookworm-slim")
    layer = render_slurm_context(base.tag)
    assert f"FROM {base.tag}".encode() in layer.files["Dockerfile"]
    assert b"slurmctld slurmd slurm-client munge libpmix-dev" in layer.files["Dockerfile"]
    assert layer.tag.startswith("clusterctl-node:slurm-") and layer.tag != base.tag
