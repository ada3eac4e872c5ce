"""mpirun inside a Slurm allocation: a new launcher, used by the slurm backend as it is."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.backends.slurm import SlurmBackend
from clusterctl.run.launchers.mpirun_allocation import MpirunInAllocation
from clusterctl.run.plan import plan_run
from clusterctl.yamlio import load_yaml

SANDBOX = Path(__file__).resolve().parents[1] / "inventories" / "sandbox-example.yml"
SHELLCHECK = Path("/usr/bin/shellcheck")


def _inventory(**slurm: Any) -> Inventory:
    document = load_yaml(SANDBOX)
    document["slurm"] = {"login": {"address": "10.213.0.11"}, "run_dir": "/shared/clusterctl", **slurm}
    return validate_document(document, SANDBOX)


def _script(inventory: Inventory, **options: Any) -> str:
    backend = SlurmBackend(launcher=MpirunInAllocation())
    return backend.describe(inventory, plan_run(inventory, "resnet50", nodes=2, **options)).text


@pytest.mark.parametrize(
    "slurm", [{"runtime": "none"}, {"runtime": "apptainer", "image": "/shared/images/bench.sif"}]
)
def test_the_batch_script_starts_the_ranks_with_one_mpirun(slurm: dict[str, Any], tmp_path: Path) -> None:
    script = _script(_inventory(**slurm), framework="ddp")
    path = tmp_path / "job.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    checked = subprocess.run([str(SHELLCHECK), "-s", "bash", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    assert "\nmpirun -np 2 --map-by ppr:1:node --bind-to core --tag-output \\\n" in script
    assert "srun --mpi" not in script  # the snapshots' srun steps stay; the run's own step is mpirun's
    # the ranks inherit what srun's would: the job's variables and its MPI transport, not mpirun's ssh
    assert "export OMPI_MCA_btl_tcp_if_include='eth0'" in script
    assert "export MASTER_PORT='29500'" in script and "plm_rsh_args" not in script
    assert (
        "payload/resnet50_bench.py --framework=ddp --batch-size=" in script
        and script.count(" || status=$?") == 1
    )


def test_pyxis_is_refused_it_exists_only_as_srun_flags() -> None:
    inventory = _inventory(runtime="pyxis", image="nvcr.io#nvidia/pytorch:24.01-py3")
    with pytest.raises(InputError, match="pyxis runtime exists only as srun flags"):
        _script(inventory)
