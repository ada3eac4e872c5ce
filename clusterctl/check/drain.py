"""Drain the nodes `check health` failed in Slurm, with the finding as the reason; resume on request.
Pure: the reason and the ``scontrol update`` argv lists (every value quoted when joined); the
effectful half, ``scontrol.py``, runs them on the inventory's Slurm login node over SSH (its host key
verified like any node's).

Slurm's node names are the inventory's node names. Nothing is ever resumed automatically: a drained
node comes back only with `clusterctl check health --slurm-resume NODE`, or the site's own
`scontrol update state=resume`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Prefixed to every reason, so a site tells clusterctl's drains from its own (`sinfo -R`).
REASON_PREFIX = "clusterctl health: "
# Slurm keeps the reason as one line; long reasons make `sinfo -R` unreadable.
MAX_REASON = 200
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
