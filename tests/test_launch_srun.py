"""The srun launcher alone: the variables the batch script exports for its ranks and its step's lines."""

from __future__ import annotations

from pathlib import Path

from clusterctl.inventory import load_inventory
from clusterctl.run.launchers.srun import Srun
from clusterctl.run.plan import plan_run

SANDBOX = Path(__file__).resolve().parents[1] / "inventories" / "sandbox-example.yml"


def test_the_ranks_get_the_jobs_variables_and_its_mpi_parameters_not_the_allocations() -> None:
    inventory = load_inventory(SANDBOX)
    job = plan_run(inventory, "resnet50", nodes=2, framework="ddp")
    env = Srun("pmix").environment(inventory, job)
    assert env == [
        ("NCCL_SOCKET_IFNAME", "=eth0"),
        ("NCCL_IB_DISABLE", "1"),
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET,TUNING"),
        ("HOROVOD_MPI_THREADS_DISABLE", "1"),
        ("MASTER_PORT", "29500"),  # MASTER_ADDR: the allocation's first node, found by the script
        ("OMPI_MCA_pml", "ob1"),
        ("OMPI_MCA_btl", "^openib"),
        ("OMPI_MCA_btl_tcp_if_include", "eth0"),
        ("OMPI_MCA_oob_tcp_if_include", "eth0"),
    ]  # no plm_rsh_args: that is mpirun's own ssh launch


def test_the_step_is_one_srun_with_the_runtimes_flags_its_binding_and_each_task_line() -> None:
    job = plan_run(load_inventory(SANDBOX), "resnet50", nodes=2)
    task = ['bash -c "$CLUSTERCTL_TASK" clusterctl-task', "--network host", "image python x.py"]
    assert Srun("pmi2").step(job, ["--container-env=A,B"], task, gpus=0) == [
        "srun --mpi=pmi2 --kill-on-bad-exit=1 --label --container-env=A,B \\",
        '  --cpus-per-task="$cpus_per_task" --cpu-bind=cores \\',
        '  bash -c "$CLUSTERCTL_TASK" clusterctl-task \\',
        "  --network host \\",
        "  image python x.py || status=$?",
    ]
    on_gpus = Srun("pmix").step(job, [], ["python x.py"], gpus=8)
    assert on_gpus[1] == '  --cpus-per-task="$cpus_per_task" --cpu-bind=cores --gpu-bind=closest \\'
    assert on_gpus[2] == "  python x.py || status=$?"
