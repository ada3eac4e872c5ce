"""The Slurm batch script: rendered for every runtime, checked by bash -n and shellcheck."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterctl.errors import InputError, InventoryError
from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.context import get_backend
from clusterctl.run.plan import plan_run
from clusterctl.run.slurm.script import DEFAULT_TELEMETRY_CAP_S, plan_batch, telemetry_cap_s
from clusterctl.yamlio import load_yaml
from tests.helpers.slurm import ROOT, SANDBOX, STARTED, slurm_inventory, slurm_script

# The Debian package scripts/setup-env.sh installs; never another copy that happens to be on PATH.
SHELLCHECK = Path("/usr/bin/shellcheck")


RUNTIMES: dict[str, dict[str, Any]] = {
    "docker": {},
    "pyxis": {"image": "nvcr.io#nvidia/pytorch:24.01-py3", "partition": "gpu", "qos": "high"},
    "apptainer": {"image": "/shared/images/bench.sif", "account": "proj1", "time_limit": "01:30:00"},
    "none": {"image": None, "constraint": "h100&ib", "extra_sbatch": ["--mail-type=END"]},
}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_each_runtime_renders_a_script_bash_and_shellcheck_accept(runtime: str, tmp_path: Path) -> None:
    script = slurm_script(runtime=runtime, **RUNTIMES[runtime])
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
    pyxis = slurm_script(runtime="pyxis", image="nvcr.io#nvidia/pytorch:24.01-py3")
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.01-py3' --no-container-mount-home" in pyxis
    apptainer = slurm_script(runtime="apptainer", image="/shared/bench.sif")
    job = "/shared/clusterctl/sandbox-20260102T030405Z-abc123"
    # --nv only on GPU nodes; the job's payload bound where the image's would be, then the inventory's
    # mounts (sandbox-example.yml's: the nodes' /srv at /data, read-only)
    assert (
        f"apptainer exec --bind={job}/payload:/opt/clusterctl/payload:ro --bind=/srv:/data:ro /shared/bench.sif"
        in apptainer
    )
    docker = slurm_script()
    for flag in (
        "--ipc host --pid host",
        "-v /var/spool/slurmd:/var/spool/slurmd",
        "io.clusterctl.slurm-job=",
    ):
        assert flag in docker
    assert "--network=host" in docker and "clusterctl/sandbox:cpu-0123456789ab" in docker
    assert "/etc/clusterctl/ssh" not in docker  # no mpirun: the cluster's SSH material stays out
    assert f"-v {job}/payload:/opt/clusterctl/payload:ro" in docker and "-v /srv:/data:ro" in docker
    none = slurm_script(runtime="none", image=None)
    assert "docker run" not in none and "apptainer" not in none
    assert f"python {job}/payload/resnet50_bench.py --framework=" in none  # on the host: the job's copy


def test_the_ssh_launchers_environment_reaches_every_rank() -> None:
    script = slurm_script()
    assert "export NCCL_SOCKET_IFNAME='=eth0'" in script
    assert "export NCCL_DEBUG='INFO'" in script
    assert "export OMPI_MCA_btl_tcp_if_include='eth0'" in script
    assert "plm_rsh_args" not in script  # mpirun's ssh launch only


def test_inventory_options_become_sbatch_lines() -> None:
    script = slurm_script(partition="gpu", account="proj1", time_limit="2-00:00:00", nodelist="node[1-2]",
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
        slurm_inventory(**{field: value})
    assert words in str(info.value) and "Fix:" in str(info.value)


def test_apptainer_needs_its_image() -> None:
    with pytest.raises(InventoryError, match="sif"):
        slurm_inventory(runtime="apptainer", image=None)


def test_unequal_ranks_per_node_are_refused() -> None:
    document = load_yaml(SANDBOX)
    document["nodes"][1]["slots"] = 2
    document["slurm"] = {"login": {"address": "10.213.0.11"}, "run_dir": "/x", "runtime": "none"}
    inventory = validate_document(document, SANDBOX)
    with pytest.raises(InputError, match="same number of ranks"):
        plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t")


def test_launcher_default_follows_the_slurm_block() -> None:
    assert get_backend(slurm_inventory(), None).name == "slurm"
    assert get_backend(slurm_inventory(default=False), None).name == "ssh"
    assert get_backend(slurm_inventory(), "ssh").name == "ssh"
    plain = validate_document(load_yaml(SANDBOX), SANDBOX)
    assert get_backend(plain, None).name == "ssh"
    with pytest.raises(InputError, match="no slurm block"):
        get_backend(plain, "slurm")
    with pytest.raises(InputError, match="--launcher 'pbs'"):
        get_backend(plain, "pbs")


MODERN = ROOT / "inventories" / "modern-h100.yml"


def _modern_pyxis(**slurm: Any) -> Inventory:
    document = load_yaml(MODERN)
    document["slurm"] = {"login": {"address": "10.20.0.100"}, "run_dir": "/shared/clusterctl", "runtime": "pyxis",
                         **slurm}  # fmt: skip
    return validate_document(document, MODERN)


def test_pyxis_runs_the_mounted_payload_in_the_ngc_image_bound_near_its_gpus() -> None:
    inventory = _modern_pyxis(image="nvcr.io#nvidia/pytorch:24.01-py3")
    script = plan_batch(inventory, plan_run(inventory, "resnet50", framework="ddp"), STARTED, "t").script
    job = "/shared/clusterctl/h100-pair-20260102T030405Z-t"
    # the job's copy of the payload, read-only where the command looks for it (pyxis: SRC:DST:FLAGS)
    assert f"--container-mounts={job}/payload:/opt/clusterctl/payload:ro" in script
    assert "python /opt/clusterctl/payload/resnet50_bench.py --framework=ddp" in script
    # DDP meets on the allocation's first node, not on the inventory's primary
    assert 'mapfile -t CLUSTERCTL_NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in script
    assert 'export MASTER_ADDR="${CLUSTERCTL_NODES[0]}"' in script and "10.21.0.1" not in script
    # the snapshot: exactly one task per node of the allocation, whatever the job's 8 per node
    assert 'srun -N "$SLURM_NNODES" -n "$SLURM_NNODES" --ntasks-per-node=1' in script
    # binding: an equal share of the node's CPUs per rank, on cores, the closest GPUs; threads to match
    assert '--cpus-per-task="$cpus_per_task" --cpu-bind=cores --gpu-bind=closest' in script
    assert "cpus_per_task=${SLURM_CPUS_PER_TASK:-$(( SLURM_CPUS_ON_NODE / SLURM_NTASKS_PER_NODE ))}" in script
    assert 'export OMP_NUM_THREADS="$cpus_per_task"' in script
    assert "export MELLANOX_VISIBLE_DEVICES='all'" in script  # enroot's hook brings the HCAs in


def test_pyxis_without_an_image_names_the_fix() -> None:
    inventory = _modern_pyxis()
    with pytest.raises(InputError, match="enroot on the nodes cannot import") as info:
        plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t")
    assert "nvcr.io#nvidia/pytorch:24.01-py3" in str(info.value)


def test_a_cpu_job_asks_for_no_gpu_binding() -> None:
    script = slurm_script()
    assert '--cpus-per-task="$cpus_per_task" --cpu-bind=cores \\\n' in script
    assert "--gpu-bind" not in script and "MELLANOX_VISIBLE_DEVICES" not in script


def test_the_ranks_know_their_image() -> None:
    inventory = _modern_pyxis(image="nvcr.io#nvidia/pytorch:24.01-py3")
    script = plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t").script
    assert "export CLUSTERCTL_IMAGE='nvcr.io#nvidia/pytorch:24.01-py3'" in script
    assert "|CLUSTERCTL_*) args+=" in slurm_script()  # the docker runtime passes it into the task's container


@pytest.mark.parametrize(
    ("limit", "seconds"),
    [
        (None, DEFAULT_TELEMETRY_CAP_S),
        ("0", DEFAULT_TELEMETRY_CAP_S),  # sbatch's "no limit"
        ("30", 30 * 60 + 60),
        ("30:15", 30 * 60 + 15 + 60),
        ("01:30:00", 5400 + 60),
        ("2-12", 2 * 86400 + 12 * 3600 + 60),
        ("1-00:30", 86400 + 1800 + 60),
        ("1-00:00:05", 86400 + 5 + 60),
    ],
)
def test_the_samplers_cap_is_the_jobs_time_limit_and_a_minute(limit: str | None, seconds: int) -> None:
    assert telemetry_cap_s(limit) == seconds


def test_the_sampler_runs_on_every_node_beside_the_run_and_is_stopped_after_it() -> None:
    script = slurm_script(time_limit="01:30:00")
    start = script.index("telemetry_pid=$!")
    assert script.index("snapshot before\n") < start < script.index("srun --mpi=")
    assert script.index("trap stop_telemetry EXIT") < script.index("srun --mpi=")
    assert script.index("srun --mpi=") < script.index("\nstop_telemetry\n") < script.index("snapshot after\n")
    assert "--max-seconds 5460 " in script and "--net 'eth0'" in script


def test_the_snapshot_and_telemetry_steps_ask_for_the_nodes_gpus_on_a_gpu_inventory() -> None:
    """srun(1), --gres: "a job step is allocated all of the generic resources that have been requested by
    the job, except those implicitly requested when a job is exclusive" (and none with SLURM_STEP_GRES=none);
    under ConstrainDevices=yes such a step's nvidia-smi sees no GPU. Both helper steps name the GPUs."""
    inventory = _modern_pyxis(image="nvcr.io#nvidia/pytorch:24.01-py3", exclusive=True)
    script = plan_batch(inventory, plan_run(inventory, "resnet50"), STARTED, "t").script
    assert "step_gpus=(--gpus-per-node=8)" in script
    lines = script.splitlines()
    helpers = [i for i, line in enumerate(lines) if line.lstrip().startswith('srun -N "$SLURM_NNODES"')]
    assert len(helpers) == 2  # the snapshot and the telemetry step
    snapshot, sampler = (" ".join(lines[i : i + 3]) for i in helpers)
    assert '${overlap[@]+"${overlap[@]}"}' in snapshot and '${step_gpus[@]+"${step_gpus[@]}"}' in snapshot
    # the sampler runs beside the training step: it holds GPUs only where --overlap shares them (22.05+)
    assert '${overlap[@]+"${overlap[@]}"}' in sampler and '${sampler_gpus[@]+"${sampler_gpus[@]}"}' in sampler
    assert "step_gpus" not in sampler
    # a CPU inventory asks for no GPU in any step
    assert "step_gpus=()" in slurm_script() and "--gpus-per-node" not in slurm_script()


def _section(script: str, start: str, end: str) -> str:
    """The lines of ``script`` from the one starting with ``start`` up to (not including) ``end``."""
    begin = script.index(start)
    return script[begin : script.index(end, begin)]


def _stub(tmp_path: Path, name: str, body: str) -> Path:
    """A directory holding an executable ``name`` that runs ``body`` (sh), to put first on PATH."""
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
    (stubs / name).chmod(0o755)
    return stubs


def test_the_overlap_probe_reads_srun_help_whole_before_matching(tmp_path: Path) -> None:
    # an srun whose help names --overlap first and then keeps writing: grep -q stops reading at the
    # match, srun dies of SIGPIPE, and under pipefail the old probe said "no --overlap"
    stubs = _stub(
        tmp_path,
        "srun",
        'echo "  --overlap"; i=0; while [ $i -lt 20000 ]; do echo "help line $i"; i=$((i+1)); done',
    )
    probe = _section(slurm_script(), "srun_help=", "\n\n")
    env = {"PATH": f"{stubs}:/usr/bin:/bin"}
    new = subprocess.run(["bash", "-c", f"set -euo pipefail\n{probe}\necho \"${{overlap[*]}}\""],
                         capture_output=True, text=True, env=env, check=True)  # fmt: skip
    assert new.stdout.strip() == "--overlap"
    old = "overlap=()\nif srun --help 2>&1 | grep -q -- --overlap; then overlap=(--overlap); fi"
    raced = subprocess.run(["bash", "-c", f"set -euo pipefail\n{old}\necho \"${{overlap[*]}}\""],
                           capture_output=True, text=True, env=env, check=True)  # fmt: skip
    assert raced.stdout.strip() == ""  # the race the new form removes
    assert "srun --help 2>&1 | grep" not in slurm_script()


def _memlock(tmp_path: Path, script: str, limits: str) -> subprocess.CompletedProcess[str]:
    """The script's probe and memlock sections run by bash, srun answering ``limits`` per node."""
    # srun --help as pyxis' srun prints it (the option only), then one line per node of the memlock step
    stubs = _stub(
        tmp_path,
        "srun",
        f'[ "$1" = --help ] && echo "  --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH" && exit 0; printf "{limits}"',
    )
    end = "\n# DDP's rendezvous" if "\n# DDP's rendezvous" in script else "\n# Binding"
    sections = _section(script, "srun_help=", end)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "SLURM_NNODES": "2"}
    return subprocess.run(["bash", "-c", f"set -euo pipefail\n{sections}\necho reached-the-run"],
                          capture_output=True, text=True, env=env)  # fmt: skip


def test_a_gpu_run_stops_below_unlimited_memlock_naming_the_slurm_settings(tmp_path: Path) -> None:
    inventory = _modern_pyxis(image="nvcr.io#nvidia/pytorch:24.01-py3")
    script = plan_batch(inventory, plan_run(inventory, "resnet50", framework="ddp"), STARTED, "t").script
    low = _memlock(tmp_path, script, "gpu01 64\\ngpu02 unlimited\\n")
    assert low.returncode == 2, low
    assert "clusterctl: memlock on gpu01: 64" in low.stdout and "memlock on gpu02: unlimited" in low.stdout
    assert "not unlimited inside the job on gpu01 (64 KiB)" in low.stdout
    assert "PropagateResourceLimitsExcept=MEMLOCK" in low.stdout and "LimitMEMLOCK=infinity" in low.stdout
    assert "reached-the-run" not in low.stdout
    fine = _memlock(tmp_path, script, "gpu01 unlimited\\ngpu02 unlimited\\n")
    assert fine.returncode == 0 and "reached-the-run" in fine.stdout, fine


def test_a_cpu_run_on_ethernet_only_reports_a_low_memlock(tmp_path: Path) -> None:
    run = _memlock(tmp_path, slurm_script(gpus_per_node=4), "node1 64\\nnode2 8192\\n")
    assert run.returncode == 0 and "reached-the-run" in run.stdout, run
    assert "warning: locked memory is not unlimited on node1 (64 KiB), node2 (8192 KiB)" in run.stdout


def test_pyxis_without_the_plugin_stops_the_job_and_the_jobs_variables_win_over_the_images(
    tmp_path: Path,
) -> None:
    inventory = _modern_pyxis(image="nvcr.io#nvidia/pytorch:24.01-py3")
    script = plan_batch(inventory, plan_run(inventory, "resnet50", framework="ddp"), STARTED, "t").script
    stubs = _stub(tmp_path, "srun", 'echo "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]"')
    probe = _section(script, "srun_help=", "\n\n")
    run = subprocess.run(["bash", "-c", f"set -euo pipefail\n{probe}\necho after"], capture_output=True,
                         text=True, env={"PATH": f"{stubs}:/usr/bin:/bin"})  # fmt: skip
    assert run.returncode == 2 and "the pyxis plugin is not loaded" in run.stdout
    # every variable the script sets for the ranks, named to pyxis
    names = script.split("--container-env=", 1)[1].split()[0].strip("'").split(",")
    exported = [line.split("=", 1)[0].removeprefix("export ") for line in script.splitlines()
                if line.startswith("export ")]  # fmt: skip
    assert set(exported) <= set(names), set(exported) - set(names)
    assert {
        "NCCL_SOCKET_IFNAME",
        "MASTER_ADDR",
        "MASTER_PORT",
        "OMP_NUM_THREADS",
        "CLUSTERCTL_GPUS_PER_NODE",
    } <= set(names)
    assert "--container-env" not in slurm_script()  # the docker runtime passes them by name itself


def test_more_ranks_per_node_than_gpus_is_refused_before_sbatch() -> None:
    # CPU nodes whose Slurm declares 4 GPUs each (the GPU-shaped sandbox): the plan cannot know them
    inventory = slurm_inventory(gpus_per_node=4)
    plan_batch(inventory, plan_run(inventory, "resnet50", framework="ddp", ranks_per_node=4), STARTED, "t")
    with pytest.raises(
        InputError, match=r"5 ranks per node on nodes with 4 GPU.*share a GPU.*--ranks-per-node 4"
    ):
        plan_batch(
            inventory, plan_run(inventory, "resnet50", framework="ddp", ranks_per_node=5), STARTED, "t"
        )
    script = slurm_script(gpus_per_node=4)
    assert "export CLUSTERCTL_GPUS_PER_NODE=4" in script and "--gpu-bind=closest" in script
