"""`run --drop-caches`: the page cache of every node of a run dropped before each repeat (a cold read of
the dataset, as Dell's study did), on the host through the tool's SSH, as root only.

Asked first on every node, before anything starts, and refused with the reason where it cannot be done:
not root, ``/proc/sys/vm/drop_caches`` not writable, or the node is itself a container (the sandbox's
nodes): a container shares the machine's kernel, so dropping "its" cache would drop the whole machine's,
under every other user's feet.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.errors import InputError, StepError
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory, Node

TIMEOUT_S = 120.0
# Prints ok, or why the page cache cannot be dropped here; reads only.
PROBE = (
    "if [ -e /.dockerenv ] || [ -e /run/.containerenv ] || grep -qE 'docker|containerd|kubepods|lxc' "
    '/proc/1/cgroup 2>/dev/null; then echo container; elif [ "$(id -u)" != 0 ]; then echo not-root; '
    "elif [ ! -w /proc/sys/vm/drop_caches ]; then echo read-only; else echo ok; fi"
)
DROP = "sync && echo 3 > /proc/sys/vm/drop_caches"
REASONS = {
    "container": "the node is a container (it shares the machine's kernel: dropping its page cache would "
    "drop the whole machine's)",
    "not-root": "its ssh.user is not root (only root may drop the page cache)",
    "read-only": "/proc/sys/vm/drop_caches is not writable there",
}


def require_droppable(inventory: Inventory, nodes: Sequence[Node]) -> None:
    """Refuse (exit 2, nothing started) when a node's page cache cannot be dropped, naming each and why.

    Raises:
        InputError: a node is a container, not logged in as root, or its drop_caches is read-only; or it
            did not answer the probe.
    """
    results = run_on_nodes(inventory, nodes, PROBE, timeout_s=TIMEOUT_S)
    refused = {}
    for name, result in results.items():
        answer = result.stdout.strip() if result.ok else ""
        if answer != "ok":
            refused[name] = REASONS.get(
                answer, f"it did not answer ({result.error or result.stderr.strip()[:200]})"
            )
    if refused:
        where = "; ".join(f"{name}: {why}" for name, why in refused.items())
        raise InputError(
            f"--drop-caches: the page cache cannot be dropped on {len(refused)} node(s) ({where}); nothing was "
            "started. Fix: run without --drop-caches (the record then says the cache was not dropped), or log "
            "in as root on hosts that are not containers."
        )


def drop_caches(inventory: Inventory, nodes: Sequence[Node]) -> None:
    """Drop the page cache on every node of ``nodes`` (``sync`` first).

    Raises:
        StepError: it failed on a node (each named).
    """
    results = run_on_nodes(inventory, nodes, DROP, timeout_s=TIMEOUT_S)
    failed = {name: r.error or r.stderr.strip()[:200] for name, r in results.items() if not r.ok}
    if failed:
        raise StepError(
            f"--drop-caches: dropping the page cache failed on {'; '.join(f'{n}: {w}' for n, w in failed.items())}"
        )
