"""`check health --level standard|burn-in`'s single-node collective on every node (issue 27).

Each node runs the collective alone, as its own one-node inventory through the run conductor (the
same path as `check pairs`: ssh launcher, no snapshot, each run bounded and recorded under the runs
directory): nccl-tests over the node's GPUs, or the payload's CPU allreduce on 2 ranks (a collective
needs two). Nodes run one after another, so they do not share the machine's load. The results are
written into the health bundle (``collectives.json``) so that ``--from`` judges them again. The
reference is the baseline of a one-node collective on this hardware, when the data has one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from clusterctl.check.pairs import conductor_measure
from clusterctl.diagnostics.active import TIERS, Level, NodeCollective
from clusterctl.errors import ConnectError, InputError, StepError
from clusterctl.inventory import Inventory
from clusterctl.readfile import read_capped
from clusterctl.results.baselines import BUSBW_METRIC, baselines_for, find_baseline, hardware_config

COLLECTIVES_FILE = "collectives.json"
_MAX_BYTES = 1 << 20
CPU_RANKS = 2


def run_collectives(
    inventory: Inventory,
    level: Level,
    runs_dir: Path,
    on_node: Callable[[NodeCollective], None] | None = None,
) -> list[NodeCollective]:
    """Every node's single-node collective at ``level`` (``TIERS[level]``: runs and bound per run).

    Raises:
        InputError: the image cannot run the collective.
    """
    tier = TIERS[level]
    measure = conductor_measure(
        inventory,
        repeats=tier.collective_runs,
        timeout_s=tier.collective_s,
        runs_dir=runs_dir,
        ranks_per_node=node_ranks(inventory),
        all_sizes=tier.all_sizes,
    )
    results = []
    for node in inventory.nodes:
        try:
            group = measure([node.name])
        except (StepError, ConnectError) as exc:  # its container or engine: the check could not look
            result = NodeCollective(node.name, (), (str(exc),), (), started=False)
        else:
            result = NodeCollective(node.name, group.samples, group.failures, group.run_dirs)
        if on_node is not None:
            on_node(result)
        results.append(result)
    return results


def node_ranks(inventory: Inventory) -> int | None:
    """Ranks of the single-node collective: None (one per GPU) on GPU nodes, else ``CPU_RANKS``."""
    return None if inventory.primary.gpus.count > 0 else CPU_RANKS


def reference(inventory: Inventory) -> tuple[float | None, str]:
    """The baseline a one-node collective on this hardware is judged by (None: the other nodes)."""
    baseline = find_baseline(BUSBW_METRIC, hardware_config(inventory, 1), baselines_for(inventory))
    return (baseline.value, f"baseline {baseline.name}") if baseline else (None, "")


def save_collectives(directory: Path, results: list[NodeCollective]) -> None:
    """Write the collectives into the health bundle ``directory``."""
    rows = [
        {
            "node": r.node,
            "samples": r.samples,
            "failures": r.failures,
            "run_dirs": r.run_dirs,
            "started": r.started,
        }
        for r in results
    ]
    (directory / COLLECTIVES_FILE).write_text(json.dumps(rows, indent=1) + "\n")


def load_collectives(directory: Path) -> list[NodeCollective] | None:
    """The collectives saved in a health bundle; None when it holds none (collected at level quick).

    Raises:
        InputError: the file is not what `check health` wrote.
    """
    path = directory / COLLECTIVES_FILE
    if not path.exists():
        return None
    try:
        rows = json.loads(read_capped(path, _MAX_BYTES, "collect the bundle again"))
        return [
            NodeCollective(
                str(r["node"]),
                tuple(float(s) for s in r["samples"]),
                tuple(str(f) for f in r["failures"]),
                tuple(str(d) for d in r["run_dirs"]),
                bool(r["started"]),
            )
            for r in rows
        ]
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise InputError(
            f"{path} is not the collectives file `check health --level` writes ({why}). Fix: delete it, or "
            "collect the bundle again."
        ) from None
