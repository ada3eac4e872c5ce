"""The shipped example inventories by image profile, for the tests of the rendered Dockerfile and its
layers."""

from __future__ import annotations

from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir

EXAMPLES = {
    "paper-2020": "paper-c4140.yml",
    "modern": "modern-h100.yml",
    "cpu": "sandbox-example.yml",
}


def example_inventory(profile: str, **container: object) -> Inventory:
    inv = load_inventory(data_dir("inventories") / EXAMPLES[profile])
    if container:
        inv = inv.model_copy(update={"container": inv.container.model_copy(update=container)})
    return inv
