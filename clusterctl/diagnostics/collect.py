"""Collect the host facts `check topology` judges: the collectors' script (``collectors``) run on each
node in one read-only SSH call, the bundles written and read back, and provision's status bundles.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from clusterctl.diagnostics.bundle import NodeBundle, read_bundle_of, write_bundle
from clusterctl.diagnostics.collectors import COLLECTORS, Collector, collection_script, node_bundle
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import cluster_state_dir

# A status bundle's directory name: its UTC time; only names of this shape are ever pruned.
STATUS_STAMP = "%Y%m%dT%H%M%SZ"
_STAMPED = re.compile(r"\d{8}T\d{6}Z")


def collect(
    inventory: Inventory,
    nodes: Sequence[Node],
    *,
    timeout_s: float = 180,
    collectors: Sequence[Collector] = COLLECTORS,
) -> dict[str, NodeBundle]:
    """Run the collection script of ``collectors`` on every node in parallel (one SSH call each);
    bundles by node name.

    An unreachable node or one that did not finish still gets a bundle, with the reason in its meta.
    """
    script = collection_script(collectors)
    results = run_on_nodes(inventory, nodes, ["sh", "-c", script], timeout_s=timeout_s)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {node.name: node_bundle(results[node.name], now, collectors) for node in nodes}


def collect_bundle(
    inventory: Inventory,
    nodes: Sequence[Node],
    directory: Path,
    *,
    timeout_s: float = 180,
    collectors: Sequence[Collector] = COLLECTORS,
) -> dict[str, NodeBundle]:
    """``collect`` from ``nodes`` and write the bundle under ``directory``; return the bundles.

    Raises:
        InputError: the directory cannot be written.
    """
    bundles = collect(inventory, nodes, timeout_s=timeout_s, collectors=collectors)
    write_bundle(directory, bundles)
    return bundles


def bundle_of_every_node(
    inventory: Inventory,
    directory: Path,
    *,
    saved: bool,
    timeout_s: float,
    collectors: Sequence[Collector] = COLLECTORS,
) -> dict[str, NodeBundle]:
    """Every node's bundle: read from ``directory`` when ``saved`` (no host contacted), else collected
    from every node of ``inventory`` into it.

    Raises:
        InputError: a saved bundle that cannot be read or was collected with another inventory, or a
            directory that cannot be written.
    """
    if saved:
        return read_bundle_of(directory, inventory)
    return collect_bundle(inventory, inventory.nodes, directory, timeout_s=timeout_s, collectors=collectors)


def capture_status(inventory: Inventory, nodes: Sequence[Node]) -> Path:
    """Collect every node's diagnostics and save them under the cluster's state, for check/inspect.

    This is the whitepaper appendix's status check after setup (topo -m, ip addr, ibstat, ibv_devinfo,
    ofed_info), kept as a bundle: ``<state dir>/clusters/<cluster>/status/<UTC time>/``.

    Returns:
        The bundle's directory.
    """
    stamp = datetime.now(UTC).strftime(STATUS_STAMP)
    directory = cluster_state_dir(inventory.cluster.name) / "status" / stamp
    collect_bundle(inventory, nodes, directory)
    prune_status_bundles(directory.parent, inventory.state.keep_bundles)
    return directory


def prune_status_bundles(status_root: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` status bundles under ``status_root``; return those removed.

    Only directories named as ``capture_status`` names them (``20260101T120000Z``) are counted or
    removed: anything else a user put there is left alone.
    """
    stamped = sorted(
        (
            d
            for d in status_root.iterdir()
            if d.is_dir() and not d.is_symlink() and _STAMPED.fullmatch(d.name)
        ),
        key=lambda d: d.name,
    )
    removed = stamped[: max(len(stamped) - keep, 0)]
    for directory in removed:
        shutil.rmtree(directory)
    return removed
