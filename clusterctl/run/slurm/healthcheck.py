"""The Slurm health-check script (`clusterctl check slurm-hc`), rendered from
``templates/slurm-healthcheck.sh.j2``. Pure.

slurm.conf's ``HealthCheckProgram`` (or a Prolog) runs it on every node: it reads the kernel log's
Xid/SXid lines, ``nvidia-smi -q`` (GPU count, remapped rows pending) and the inventory's InfiniBand
ports (state, rate) on the node itself, and drains the node with the problems as the reason, the
reason prefixed like `check health --slurm-drain`'s. Every command has its own bound, and the bounds
add up to ``BOUND_S``, well under the 60 s after which slurmd kills the health-check program.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.inventory import Inventory
from clusterctl.run.slurm.drain import MAX_REASON, REASON_PREFIX
from clusterctl.run.slurm.script import quote_always
from clusterctl.templating import template_environment

TEMPLATE = "slurm-healthcheck.sh.j2"
# Seconds each command may take (each is then killed, 2 s later with SIGKILL at the latest).
DMESG_S, SMI_S, SCONTROL_S = 8, 15, 10
KILL_AFTER_S = 2
BOUND_S = DMESG_S + SMI_S + SCONTROL_S + 3 * KILL_AFTER_S
SLURM_HEALTH_CHECK_KILL_S = 60


@dataclass(frozen=True)
class Port:
    """An InfiniBand port the script checks: the HCA and its port number."""

    hca: str
    port: int


def hc_ports(inventory: Inventory) -> list[Port]:
    """The primary's inventory HCAs (the inventory keeps every node's fabric alike), port 1 unless named."""
    fabric = inventory.primary.fabric
    if fabric.kind != "infiniband" or not fabric.hca:
        return []
    return [Port(h.split(":")[0], int(h.split(":")[1]) if ":" in h else 1) for h in fabric.hca]


def render_healthcheck(inventory: Inventory) -> str:
    """The health-check script for ``inventory``'s nodes (its GPUs, HCAs and link rate)."""
    env = template_environment()
    env.filters["q"] = quote_always
    node = inventory.primary
    return env.get_template(TEMPLATE).render(
        cluster=inventory.cluster.name,
        gpus=node.gpus.count,
        ports=hc_ports(inventory),
        rate=int(node.fabric.rate_gbps) if node.fabric.rate_gbps else 0,
        prefix=REASON_PREFIX,
        max_reason=MAX_REASON,
        dmesg_s=DMESG_S,
        smi_s=SMI_S,
        scontrol_s=SCONTROL_S,
        bound_s=BOUND_S,
    )
