"""A workload's job on an inventory: ``build_job``. Pure.

The workload is asked, before anything else is built, whether the image runs it, what each rank runs,
what the ranks take from the launching shell and whether its settings fit the devices; the job's
environment and hosts come from the inventory (``clusterctl.workloads.job``).
"""

from __future__ import annotations

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, Node
from clusterctl.workloads.base import Workload
from clusterctl.workloads.images import check_image_runs
from clusterctl.workloads.job import (
    FORWARDED_ENV,
    GPU_FORWARDED_ENV,
    HostSlots,
    Job,
    RunOptions,
    binds_ranks,
    mpi_transport,
    nccl_env,
    rendezvous_env,
    select_nodes,
)


def build_job(inventory: Inventory, options: RunOptions, workload: Workload) -> Job:
    """The job of ``workload`` with ``options`` on ``inventory``.

    Raises:
        InputError: the inventory's image cannot run the workload, more ranks per node than a node
            has GPUs, or settings the workload refuses (``Workload.check_plan``).
    """
    check_image_runs(workload, inventory)
    hosts = [
        HostSlots(node=n.name, address=n.fabric_ip, slots=_slots(n, options))
        for n in select_nodes(inventory, options.nodes)
    ]
    gpu = inventory.primary.gpus.count > 0
    workload.check_plan(inventory, options.settings, sum(h.slots for h in hosts))
    own_env = workload.forwarded_env(inventory)
    return Job(
        options=options,
        hosts=hosts,
        env={**nccl_env(inventory, options.settings), **rendezvous_env(options.settings, hosts[0].address)},
        forwarded=[*FORWARDED_ENV, *(GPU_FORWARDED_ENV if gpu else ()), *own_env],
        mpi=mpi_transport(inventory),
        rank_argv=workload.argv(options.settings, gpu=gpu),
        bind=binds_ranks(inventory),
        gpu=gpu,
    )


def _slots(node: Node, options: RunOptions) -> int:
    if options.ranks_per_node is None:
        return node.ranks
    if node.gpus.count and options.ranks_per_node > node.gpus.count:
        raise InputError(
            f"--ranks-per-node {options.ranks_per_node} > {node.gpus.count} GPUs on {node.name}; "
            "run at most one rank per GPU."
        )
    return options.ranks_per_node
