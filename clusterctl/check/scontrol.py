"""`check health --slurm-drain`/`--slurm-resume` on the Slurm login node: each ``scontrol update``
that ``drain.py`` builds, run over SSH (the login node's host key verified like any node's)."""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.check.drain import SlurmAction, update_argv
from clusterctl.errors import ConnectError, InputError
from clusterctl.inventory import Inventory

SCONTROL_TIMEOUT_S = 30


def apply_actions(inventory: Inventory, actions: Sequence[SlurmAction]) -> list[SlurmAction]:
    """Run each action's ``scontrol update`` on the login node; each result says how it went.

    Raises:
        InputError: the inventory has no slurm block (no login node to run scontrol on).
        ConnectError: the login node cannot be reached.
    """
    if inventory.slurm is None:
        raise InputError(
            "the inventory has no slurm block, so there is no Slurm to drain nodes in. Fix: add slurm.login "
            "to the inventory, or drop --slurm-drain/--slurm-resume."
        )
    # Imported on use: SSH (fabric, paramiko) and the batch script's templates.
    from clusterctl.hosts.ssh import connect, run
    from clusterctl.run.slurm.script import login_node

    login = login_node(inventory.slurm)
    done = []
    with connect(inventory, login) as conn:
        for action in actions:
            result = run(conn, login, update_argv(action), timeout_s=SCONTROL_TIMEOUT_S)
            if result.unreachable:
                raise ConnectError(f"slurm login node {login.address}: {result.error}")
            detail = (result.stderr or result.stdout or result.error or "").strip()
            done.append(
                SlurmAction(action.node, action.state, action.reason, ok=result.exit_code == 0, detail=detail)
            )
    return done
