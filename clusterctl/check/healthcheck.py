"""The Slurm health-check script (`clusterctl check slurm-hc`), rendered from
``templates/slurm-healthcheck.sh.j2``. Pure.

slurm.conf's ``HealthCheckProgram`` (or a Prolog) runs it on every node: it reads the kernel log's
Xid/SXid lines, ``nvidia-smi -q`` (GPU count, remapped rows pending) and the node's InfiniBand ports
(state, rate) on the node itself, and drains the node with the problems as the reason, the reason
prefixed like `check health --slurm-drain`'s. Every command has its own bound, and the bounds add up to
``BOUND_S``, well under the 60 s after which slurmd kills the health-check program.

It drains only for what needs a drain: the Xids clusterctl's own table calls errors
(``clusterctl.diagnostics.rules_health.XID_ACTIONS``; never the application's 13, 31, 43 nor the 45 a
killed CUDA process leaves) and fatal SXids, and only events newer than its last look: the Xid lines
it has judged this boot are kept on the node (``STATE_DIR``), since the kernel keeps them until reboot
and a node an admin resumes must stay resumed. Each node is judged against its own inventory values
(GPU count, HCAs, link rate), chosen by its Slurm node name, which is its inventory name.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.check.drain import MAX_REASON, REASON_PREFIX
from clusterctl.diagnostics.rules_health import XID_ACTIONS
from clusterctl.inventory import Inventory, Node
from clusterctl.run.slurm.script import quote_always
from clusterctl.templating import template_environment

TEMPLATE = "slurm-healthcheck.sh.j2"
# Seconds each command may take (each is then killed, 2 s later with SIGKILL at the latest).
DMESG_S, SMI_S, SCONTROL_S = 8, 15, 10
KILL_AFTER_S = 2
BOUND_S = DMESG_S + SMI_S + SCONTROL_S + 3 * KILL_AFTER_S
SLURM_HEALTH_CHECK_KILL_S = 60
# Where the script keeps, per node, the kernel-log Xid lines it has judged this boot (its cursor);
# CLUSTERCTL_HC_STATE overrides it (for testing). slurmd runs the health check as root.
STATE_DIR = "/var/lib/clusterctl/slurm-hc"
# The Xids that drain: those clusterctl's Xid table calls errors (hardware, driver, GSP, uncontained ECC).
DRAIN_XIDS = tuple(sorted(code for code, action in XID_ACTIONS.items() if action.severity == "error"))


@dataclass(frozen=True)
class Port:
    """An InfiniBand port the script checks: the HCA and its port number."""

    hca: str
    port: int


@dataclass(frozen=True)
class NodeExpectation:
    """What one node must show: its GPU count, its InfiniBand ports and their rate (0: not checked)."""

    name: str
    gpus: int
    ports: tuple[Port, ...]
    rate: int

    @property
    def port_list(self) -> str:
        """The ports as the script's array items: ``mlx5_0:1 mlx5_1:1``."""
        return " ".join(f"{p.hca}:{p.port}" for p in self.ports)


def node_ports(node: Node) -> list[Port]:
    """The node's inventory HCAs, port 1 unless named; none off InfiniBand or without a list."""
    fabric = node.fabric
    if fabric.kind != "infiniband" or not fabric.hca:
        return []
    return [Port(h.split(":")[0], int(h.split(":")[1]) if ":" in h else 1) for h in fabric.hca]


def expectations(inventory: Inventory) -> list[NodeExpectation]:
    """Every inventory node's own expected GPU count, ports and link rate (per-node values included)."""
    return [
        NodeExpectation(
            name=node.name,
            gpus=node.gpus.count,
            ports=tuple(node_ports(node)),
            rate=int(node.fabric.rate_gbps) if node.fabric.rate_gbps and node_ports(node) else 0,
        )
        for node in inventory.nodes
    ]


def render_healthcheck(inventory: Inventory) -> str:
    """The health-check script for ``inventory``'s nodes (each its own GPUs, HCAs and link rate)."""
    env = template_environment()
    env.filters["q"] = quote_always
    nodes = expectations(inventory)
    any_gpus, any_ports = any(n.gpus for n in nodes), any(n.ports for n in nodes)

    def values(gpus: int, ports: str, rate: int) -> str:
        """The case branch's assignments: only the variables a later check reads."""
        parts = [f"gpus={gpus}"] if any_gpus else []
        return "; ".join(parts + ([f"ports=({ports})", f"rate={rate}"] if any_ports else []))

    return env.get_template(TEMPLATE).render(
        cluster=inventory.cluster.name,
        cases=[(n.name, values(n.gpus, n.port_list, n.rate)) for n in nodes],
        unknown=values(0, "", 0),
        any_gpus=any_gpus,
        any_ports=any_ports,
        drain_xids=DRAIN_XIDS,
        state_dir=STATE_DIR,
        prefix=REASON_PREFIX,
        max_reason=MAX_REASON,
        dmesg_s=DMESG_S,
        smi_s=SMI_S,
        scontrol_s=SCONTROL_S,
        bound_s=BOUND_S,
    )
