"""The Slurm batch script: rendered for every runtime, checked by bash -n and shellcheck."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from clusterctl.errors import InputError, InventoryError
from clusterctl.inventory import Inventory, validate_document
from clusterctl.launch import plan_run
from clusterctl.launchers import get_launcher
from clusterctl.slurm.script import plan_batch
from clusterctl.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[1]
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
# The Debian package scripts/setup-env.sh installs; never another copy that happens to be on PATH.
SHELLCHECK = Path("/usr/bin/shellcheck")
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _inventory(**slurm: Any) -> Inventory:
    document = load_yaml(SANDBOX)
    document["slurm"] = {
        "login": {"address": "10.213.0.11"},
        "run_dir": "/shared/clusterctl",
        "runtime": "docker",
        "image": "clusterctl/sandbox:cpu-0123456789ab",
        **slurm,
    }
    return validate_document(document, SANDBOX)


def _script(**slurm: Any) -> str:
    inventory = _inventory(**slurm)
    return plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "abc123").script


RUNTIMES: dict[str, dict[str, Any]] = {
    "docker": {},
    "pyxis": {"image": "nvcr.io#nvidia/pytorch:24.01-py3", "partition": "gpu", "qos": "high"},
    "apptainer": {"image": "/shared/images/bench.sif", "account": "proj1", "time_limit": "01:30:00"},
    "none": {"image": None, "constraint": "h100&ib", "extra_sbatch": ["--mail-type=END"]},
}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_each_runtime_renders_a_script_bash_and_shellcheck_accept(runtime: str, tmp_path: Path) -> None:
    script = _script(runtime=runtime, **RUNTIMES[runtime])
    path = tmp_path / f"{runtime}.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if not SHELLCHECK.is_file():
        pytest.fail(
            f"{SHELLCHECK} is missing: run `bash scripts/setup-env.sh` (it installs Debian's shellcheck)"
        )
    checked = subprocess.run([str(SHELLCHECK), "-s", "bash", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in script
    assert "srun --mpi=pmix --kill-on-bad-exit=1 --label" in script
    assert "#SBATCH --output=/shared/clusterctl/sandbox-20260102T030405Z-abc123/output.log" in script


def test_runtime_flags_are_the_ones_each_runtime_needs() -> None:
    pyxis = _script(runtime="pyxis", image="nvcr.io#nvidia/pytorch:24.01-py3")
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.01-py3' --no-container-mount-home" in pyxis
    apptainer = _script(runtime="apptainer", image="/shared/bench.sif")
    assert "apptainer exec /shared/bench.sif" in apptainer  # --nv only on GPU nodes
    docker = _script()
    for flag in (
        "--ipc host --pid host",
        "-v /var/spool/slurmd:/var/spool/slurmd",
        "io.clusterctl.slurm-job=",
    ):
        assert flag in docker
    assert "--network=host" in docker and "clusterctl/sandbox:cpu-0123456789ab" in docker
    assert "/etc/clusterctl/ssh" not in docker  # no mpirun: the cluster's SSH material stays out
    none = _script(runtime="none", image=None)
    assert "docker run" not in none and "apptainer" not in none


def test_the_ssh_launchers_environment_reaches_every_rank() -> None:
    script = _script()
    assert "export NCCL_SOCKET_IFNAME='=eth0'" in script
    assert "export NCCL_DEBUG='INFO'" in script
    assert "export OMPI_MCA_btl_tcp_if_include='eth0'" in script
    assert "plm_rsh_args" not in script  # mpirun's ssh launch only


def test_inventory_options_become_sbatch_lines() -> None:
    script = _script(partition="gpu", account="proj1", time_limit="2-00:00:00", nodelist="node[1-2]",
                     gpus_per_node=4, exclusive=True, extra_sbatch=["--mail-type=END"])  # fmt: skip
    for line in ("--partition=gpu", "--account=proj1", "--time=2-00:00:00", "--nodelist=node[1-2]",
                 "--gpus-per-node=4", "--exclusive", "--mail-type=END"):  # fmt: skip
        assert f"#SBATCH {line}\n" in script


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("extra_sbatch", ["--mail-type=END; rm -rf /"], "an sbatch option"),
        ("extra_sbatch", ["--output=/tmp/x"], "sets --output"),
        ("extra_sbatch", ["-N 4"], "an sbatch option"),
        ("partition", "gpu$(id)", "a Slurm name"),
        ("time_limit", "1 hour", "a Slurm time limit"),
        ("run_dir", "shared/x", "absolute path"),
        ("runtime", "singularity", "runtime"),
        ("image", "a b", "a container image"),
    ],
)
def test_values_that_would_reach_a_shell_are_refused(field: str, value: object, words: str) -> None:
    with pytest.raises(InventoryError, match=r"slurm\.") as info:
        _inventory(**{field: value})
    assert words in str(info.value) and "Fix:" in str(info.value)


def test_apptainer_needs_its_image() -> None:
    with pytest.raises(InventoryError, match="sif"):
        _inventory(runtime="apptainer", image=None)


def test_unequal_ranks_per_node_are_refused() -> None:
    document = load_yaml(SANDBOX)
    document["nodes"][1]["slots"] = 2
    document["slurm"] = {"login": {"address": "10.213.0.11"}, "run_dir": "/x", "runtime": "none"}
    inventory = validate_document(document, SANDBOX)
    with pytest.raises(InputError, match="same number of ranks"):
        plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t")


def test_launcher_default_follows_the_slurm_block() -> None:
    assert get_launcher(_inventory(), None).name == "slurm"
    assert get_launcher(_inventory(default=False), None).name == "ssh"
    assert get_launcher(_inventory(), "ssh").name == "ssh"
    plain = validate_document(load_yaml(SANDBOX), SANDBOX)
    assert get_launcher(plain, None).name == "ssh"
    with pytest.raises(InputError, match="no slurm block"):
        get_launcher(plain, "slurm")
    with pytest.raises(InputError, match="--launcher 'pbs'"):
        get_launcher(plain, "pbs")
