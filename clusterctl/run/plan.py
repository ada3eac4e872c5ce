"""The run's jobs from the command line: its options, the job of a workload on an inventory, and the
rendezvous ports a run tries. Pure.

Options are validated like the inventory (``run_options``); the job itself is built by the workloads
(``clusterctl.workloads.build``) and started by a backend through a launcher (``clusterctl.run.backends``,
``clusterctl.run.launchers``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import ValidationError

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, RunDefaults
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.job import DDP_MASTER_PORT, Job, RunOptions

# The ports a run's rendezvous is drawn from: torch's default and up, below Linux's ephemeral range
# (32768-60999 by default), where the kernel picks outgoing connections' ports.
RENDEZVOUS_PORTS = range(DDP_MASTER_PORT, 32768)
# Ports a run tries, its own first, where some are in use (the ssh backend's check, the batch script's).
RENDEZVOUS_TRIES = 8


def run_options(
    inventory: Inventory,
    workload: str,
    *,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    **overrides: Any,
) -> RunOptions:
    """Run options from the workload's defaults and the inventory's run settings for it
    (``Inventory.run_settings``), with the given (non-None) overrides applied.

    Overrides are validated like the inventory, so a bad value is an error here, not in a shell.
    Override names are ``RunDefaults`` fields, which the command line spells as options
    (``batch_size`` is ``--batch-size``); the error names the option.

    Raises:
        InputError: an override is invalid or more nodes are asked for than the inventory has.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    base = inventory.run_settings(workload, get_workload(workload).defaults(inventory))
    try:
        # Lax: a sweep's values arrive as command-line text ("128"), not as YAML numbers.
        settings = RunDefaults.model_validate({**base, **given}, strict=False)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{str(e['loc'][0]).replace('_', '-')} {e['input']!r}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors()
        )
        raise InputError(
            f"invalid run option {problems}. Fix: give a value the option accepts (`--help` lists them)."
        ) from None
    count = nodes if nodes is not None else len(inventory.nodes)
    if not 1 <= count <= len(inventory.nodes):
        raise InputError(
            f"--nodes {count}: the inventory has {len(inventory.nodes)} node(s); use 1 to {len(inventory.nodes)}."
        )
    return RunOptions(workload=workload, nodes=count, ranks_per_node=ranks_per_node, settings=settings)


def plan_run(
    inventory: Inventory,
    workload: str,
    *,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    **overrides: Any,
) -> Job:
    """The job of ``workload`` on ``inventory``: ``run_options`` and ``build_job`` in one call.

    Raises:
        InputError: an unknown workload, an invalid override, or a count the inventory cannot hold.
    """
    spec = get_workload(workload)
    options = run_options(inventory, workload, nodes=nodes, ranks_per_node=ranks_per_node, **overrides)
    return build_job(inventory, options, spec)


def rendezvous_ports(run_id: str, count: int = RENDEZVOUS_TRIES) -> list[int]:
    """The ports the run ``run_id`` tries for its rendezvous, first choice first: ``count`` consecutive
    ports of ``RENDEZVOUS_PORTS`` (wrapping) from one that a hash of ``run_id`` picks."""
    first = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")
    return [RENDEZVOUS_PORTS[(first + i) % len(RENDEZVOUS_PORTS)] for i in range(count)]


def with_rendezvous_port(job: Job, port: int) -> Job:
    """``job`` with rank 0's rendezvous on ``port`` (``MASTER_PORT``); a job without a rendezvous
    (Horovod) unchanged.

    Raises:
        InputError: ``port`` is not one of ``RENDEZVOUS_PORTS``.
    """
    if job.rendezvous_port is None:
        return job
    if port not in RENDEZVOUS_PORTS:
        raise InputError(
            f"rendezvous port {port!r} is outside {RENDEZVOUS_PORTS.start}-{RENDEZVOUS_PORTS.stop - 1}. "
            "Fix: pick one in that range (below the kernel's ephemeral ports)."
        )
    return job.model_copy(update={"env": {**job.env, "MASTER_PORT": str(port)}})
