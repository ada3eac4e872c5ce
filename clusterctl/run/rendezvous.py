"""Rank 0's rendezvous port for one run (DDP, FSDP): derived from the run id, checked free on rank 0's node.

``run.plan.rendezvous_ports`` gives the run's candidates; here one SSH command on rank 0's node host tries
them in order and answers the first that nothing listens on at rank 0's address (bash's ``/dev/tcp``: a
refused connection is a free port). The benchmark container shares the host's network, so the host's
ports are the container's. The ssh backend asks here (``SshBackend.prepare``); with the slurm backend rank
0's node is the scheduler's choice: the batch script does the same check there
(templates/slurm-batch.sh.j2).
"""

from __future__ import annotations

from clusterctl.errors import EnvironmentProblem
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory
from clusterctl.run.plan import rendezvous_ports
from clusterctl.workloads.job import Job

# Seconds the check may take on the node (connects to its own address: refused or accepted at once).
PROBE_TIMEOUT_S = 20
# The probe's exit code when every candidate is in use.
ALL_IN_USE = 3


def probe_argv(address: str, ports: list[int]) -> list[str]:
    """bash printing the first of ``ports`` nothing listens on at ``address``; exit ``ALL_IN_USE`` if none."""
    script = (
        'for p in "${@:2}"; do (exec 3<>"/dev/tcp/$1/$p") 2>/dev/null || { echo "$p"; exit 0; }; done; '
        f"exit {ALL_IN_USE}"
    )
    return ["bash", "-c", script, "probe", address, *(str(p) for p in ports)]


def choose_port(inventory: Inventory, job: Job, run_id: str) -> int:
    """The rendezvous port of the run ``run_id`` of ``job``: the first candidate free on rank 0's node;
    the first candidate where the node gives no answer (the launch then says why).

    Raises:
        EnvironmentProblem: every candidate is in use on rank 0's node.
    """
    ports = rendezvous_ports(run_id)
    rank0 = job.hosts[0]
    node = inventory.node(rank0.node)
    result = run_on_nodes(inventory, [node], probe_argv(rank0.address, ports), timeout_s=PROBE_TIMEOUT_S)[
        node.name
    ]
    if result.exit_code == ALL_IN_USE:
        raise EnvironmentProblem(
            f"ports {ports[0]}-{ports[-1]} are all in use on {node.name} ({rank0.address}), where this run's "
            "rank 0 would listen for the DDP rendezvous. Fix: end what holds them (another run?), or "
            "run again: the next run tries other ports."
        )
    answer = result.stdout.strip() if result.exit_code == 0 else ""
    return int(answer) if answer in {str(p) for p in ports} else ports[0]
