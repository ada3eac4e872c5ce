"""Drain the nodes `check health` failed in Slurm, with the finding as the reason; resume on request.

The pure half builds ``scontrol update`` argv lists (every value quoted when joined); the effectful
half runs them on the inventory's Slurm login node over SSH (its host key verified like any node's).
Slurm's node names are the inventory's node names. Nothing is ever resumed automatically: a drained
node comes back only with `clusterctl check health --slurm-resume NODE`, or the site's own
`scontrol update state=resume`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from clusterctl.errors import ConnectError, InputError
from clusterctl.inventory import Inventory

# Prefixed to every reason, so a site tells clusterctl's drains from its own (`sinfo -R`).
REASON_PREFIX = "clusterctl health: "
# Slurm keeps the reason as one line; long reasons make `sinfo -R` unreadable.
MAX_REASON = 200
SCONTROL_TIMEOUT_S = 30
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


@dataclass(frozen=True)
class SlurmAction:
    """One node to drain (with the reason) or resume, and how it went."""

    node: str
    state: str
    reason: str
    ok: bool | None = None
    detail: str = ""


def drain_reason(summary: str) -> str:
    """The reason Slurm records: the prefix and the finding, one printable line, bounded."""
    text = REASON_PREFIX + _UNPRINTABLE.sub(" ", summary).strip()
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def update_argv(action: SlurmAction) -> list[str]:
    """``scontrol update nodename=NODE state=drain reason=...`` (or state=resume) as an argv list."""
    argv = ["scontrol", "update", f"nodename={action.node}", f"state={action.state}"]
    return argv + ([f"reason={action.reason}"] if action.state == "drain" else [])


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
