"""`clusterctl run --preflight`: the fabric's collective bandwidth measured first, the model run refused below
the inventory's threshold.

The collective is the one the run's gradients go through: ``nccl-tests`` (all_reduce_perf) on GPUs,
the payload's ``allreduce`` benchmark (Horovod over MPI/Gloo, or torch's Gloo) on CPUs; under FSDP its
two, the all-gather and the reduce-scatter (all_gather_perf and reduce_scatter_perf, or the payload's
``--op``), one run each. It runs with the
model run's own options (nodes, ranks per node, framework), is recorded in the same history (so
`report` can predict from it) and is judged by ``refusal`` (pure): an invalid collective run, or a
bus bandwidth below the minimum, refuses the model run with the reason. The minimum is
``preflight.min_bus_bandwidth_gb_s``, else the floor of the baseline matching the run's hardware and
node count (the site's own first, `clusterctl baseline save`), else none (``preflight_minimum``).
This module is the pure half (the collective's plan, the verdict); the conductor runs it
(``clusterctl.run.conductor``).
"""

from __future__ import annotations

from clusterctl.errors import RunFailed
from clusterctl.inventory import Inventory
from clusterctl.results.baselines import BUSBW_METRIC, Baseline, find_baseline, hardware_config
from clusterctl.results.record import RunRecord
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.job import Job
from clusterctl.workloads.nccl_tests import LARGE_BUSBW


class PreflightRefused(RunFailed):
    """The collective benchmark ran and showed a fabric too slow (or broken) for the model run."""


# The collectives each framework's step goes through (FSDP: parameters gathered, gradients scattered).
COLLECTIVES = {"fsdp": ("allgather", "reducescatter")}


def preflight_plans(inventory: Inventory, plan: Job) -> tuple[Job, ...]:
    """The collective benchmark's jobs on ``plan``'s nodes, ranks and settings: one allreduce,
    or under FSDP one all-gather and one reduce-scatter.

    Raises:
        InputError: the image cannot run the collective (a GPU image without nccl-tests).
    """
    name = "nccl-tests" if plan.gpu else "allreduce"
    settings = plan.options.settings
    return tuple(
        build_job(
            inventory,
            plan.options.model_copy(
                update={"workload": name, "settings": settings.model_copy(update={"collective": op})}
            ),
            get_workload(name),
        )
        for op in COLLECTIVES.get(settings.framework, ("allreduce",))
    )


INVENTORY_MINIMUM = "preflight.min_bus_bandwidth_gb_s"


def preflight_minimum(
    inventory: Inventory, nodes: int, baselines: list[Baseline]
) -> tuple[float | None, str]:
    """The least bus bandwidth a collective on ``nodes`` nodes must reach, and where it comes from: the
    inventory's ``preflight.min_bus_bandwidth_gb_s``, else the matching baseline's floor (None: no minimum)."""
    if inventory.preflight.min_bus_bandwidth_gb_s is not None:
        return inventory.preflight.min_bus_bandwidth_gb_s, INVENTORY_MINIMUM
    baseline = find_baseline(BUSBW_METRIC, hardware_config(inventory, nodes), baselines)
    if baseline is None:
        return None, ""
    return (
        baseline.floor,
        f"the floor of baseline {baseline.name} ({baseline.value:g} GB/s less {baseline.tolerance:.0%})",
    )


def refusal(record: RunRecord, minimum_gb_s: float | None, source: str = INVENTORY_MINIMUM) -> str | None:
    """Why the model run must not start after the collective run ``record``; None: it may. ``source``
    says where the minimum comes from. Pure."""
    where = f"preflight {record.config.workload} on {record.nodes} node(s), {record.world_size} ranks"
    if not record.valid:
        problems = "; ".join(f.message for f in record.findings if f.severity == "error") or "invalid run"
        return f"{where} failed: {problems} (run directory {record.run_id})"
    busbw = record.metrics.get(LARGE_BUSBW)
    if minimum_gb_s is None:
        return None
    if busbw is None:
        return f"{where} printed no bus bandwidth (run directory {record.run_id})"
    if busbw.value < minimum_gb_s:
        return (
            f"{where}: bus bandwidth {busbw.value:.3g} GB/s is below {source} "
            f"{minimum_gb_s:g} GB/s; the model run was not started. `clusterctl check` probes the fabric"
        )
    return None
