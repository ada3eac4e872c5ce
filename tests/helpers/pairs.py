"""The check-pairs tests' material: the sandbox's inventory grown to any number of nodes, and a simulated
cluster whose groups measure what the test says."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clusterctl.check.pairs import Group
from clusterctl.inventory import Inventory, validate_document
from clusterctl.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"


def pairs_inventory(count: int) -> Inventory:
    document = load_yaml(SANDBOX)
    document["nodes"] = [
        {"name": f"n{i:02d}", "address": f"10.213.0.{10 + i}", **({"role": "primary"} if i == 1 else {})}
        for i in range(1, count + 1)
    ]
    return validate_document(document, SANDBOX)


class Cluster:
    """A simulated cluster: a group's bus bandwidth is 2 GB/s, 0.3 with ``slow`` in it; with
    ``shrinking``, divided by half the group's size (as on the sandbox, whose nodes share its cores)."""

    def __init__(self, slow: str | None, *, shrinking: bool = False) -> None:
        self.slow = slow
        self.shrinking = shrinking
        self.measured: list[tuple[str, ...]] = []

    def __call__(self, group: Sequence[str]) -> Group:
        self.measured.append(tuple(group))
        # Three repeats, one of them noisy: the median decides.
        figure = (0.3 if self.slow in group else 2.0) / (len(group) / 2 if self.shrinking else 1)
        return Group(tuple(group), (figure, figure * 0.2, figure * 1.1), (), ())
