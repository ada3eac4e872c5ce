"""Sweeps: a grid of runs (device counts x settings), planned from the inventory. Pure."""

from __future__ import annotations

import itertools
from typing import Any

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.run.plan import plan_run
from clusterctl.workloads.job import Job


def placement(inventory: Inventory, devices: int) -> tuple[int, int]:
    """(nodes, ranks per node) for ``devices`` ranks: one node while it fits, else whole nodes.

    Raises:
        InputError: the count neither fits one node nor fills whole nodes of this inventory.
    """
    per_node = inventory.primary.ranks
    if 1 <= devices <= per_node:
        return 1, devices
    nodes, rest = divmod(devices, per_node)
    if rest or nodes > len(inventory.nodes):
        raise InputError(
            f"{devices} devices: a node here runs {per_node} rank(s) and there are {len(inventory.nodes)} "
            f"node(s); use up to {per_node} or a multiple of it up to {per_node * len(inventory.nodes)}."
        )
    return nodes, per_node


def plan_sweep(
    inventory: Inventory, workload: str, devices: list[int], grid: dict[str, list[Any]]
) -> list[Job]:
    """The jobs of every combination of ``devices`` and the ``grid`` of settings (field -> values).

    In order: for each combination of settings, every device count.

    Raises:
        InputError: a device count this inventory cannot place, or an invalid setting.
    """
    names = list(grid)
    out = []
    for combo in itertools.product(*(grid[n] for n in names)):
        for count in devices:
            nodes, ranks = placement(inventory, count)
            overrides = dict(zip(names, combo, strict=True))
            out.append(plan_run(inventory, workload, nodes=nodes, ranks_per_node=ranks, **overrides))
    return out
