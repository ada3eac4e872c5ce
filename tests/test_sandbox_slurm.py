"""The sandbox Slurm's pure parts: slurm.conf, the Epilog, sinfo, the slurm block, the node image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterctl.inventory import load_inventory
from clusterctl.sandbox.inventory import write_inventory
from clusterctl.sandbox.nodeimage import render_context, render_slurm_context
from clusterctl.sandbox.plan import plan_cpus, plan_sandbox
from clusterctl.sandbox.slurm import (
    DECLARED_CPUS,
    RUN_DIR,
    munge_key,
    parse_sinfo_nodes,
    render_epilog,
    render_slurm_conf,
)
from clusterctl.sandbox.state import sandbox_files

SHELLCHECK = Path("/usr/bin/shellcheck")


def test_slurm_conf_gives_each_node_its_cpusets_cpu_count_and_at_least_the_declared_cpus() -> None:
    plan = plan_sandbox("dev-1", 3, "10.9.0.0/24")
    big = render_slurm_conf(plan, plan_cpus(list(range(30)), 3))  # 10 CPUs each
    assert "NodeName=node1 NodeAddr=10.9.0.11 CPUs=10 State=UNKNOWN\n" in big
    conf = render_slurm_conf(plan, plan_cpus([0, 1, 2, 3, 4, 5, 6], 3))  # 2 CPUs each, 1 left over
    # declared more than it has, so that 2 ranks per node can start; slurmd keeps the declared count
    assert "SlurmdParameters=config_overrides\n" in conf
    assert "SlurmctldHost=node1(10.9.0.11)\n" in conf
    assert "SlurmctldParameters=enable_configless\n" in conf
    assert "ClusterName=dev_1\n" in conf
    for i in (1, 2, 3):
        assert f"NodeName=node{i} NodeAddr=10.9.0.{10 + i} CPUs={DECLARED_CPUS} State=UNKNOWN\n" in conf
    assert "Epilog=/etc/slurm/clusterctl-epilog.sh\n" in conf
    assert "ProctrackType=proctrack/linuxproc\n" in conf


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
    write_inventory(plan, files, plan_cpus([0, 1], 2), slurm=True)
    slurm = load_inventory(files.inventory).slurm
    assert slurm is not None
    assert (slurm.login.address, slurm.runtime, slurm.run_dir, slurm.default) == (
        "10.9.0.11",
        "docker",
        RUN_DIR,
        False,
    )
    assert slurm.login.ssh.identity_file == str(files.private_key)
    write_inventory(plan, files, plan_cpus([0, 1], 2))
    assert load_inventory(files.inventory).slurm is None


def test_slurm_node_image_is_a_layer_on_the_node_image() -> None:
    base = render_context("debian:bookworm-slim")
    layer = render_slurm_context(base.tag)
    assert f"FROM {base.tag}".encode() in layer.files["Dockerfile"]
    assert b"slurmctld slurmd slurm-client munge libpmix-dev" in layer.files["Dockerfile"]
    assert layer.tag.startswith("clusterctl-node:slurm-") and layer.tag != base.tag
