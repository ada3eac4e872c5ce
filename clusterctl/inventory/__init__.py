"""The inventory: one YAML file describing the cluster, validated once at load by pydantic v2.

The package's face: the models and the loader that the rest of clusterctl imports. Inside:
``types`` (the checked value types), ``profiles`` (the image profiles' defaults), ``models``,
``rules`` (the cross-field rules), ``location`` (an error's file, line, field and fix) and ``load``.
"""

from clusterctl.inventory.load import inventory_schema, load_inventory, validate_document
from clusterctl.inventory.location import format_loc
from clusterctl.inventory.models import (
    FabricSpec,
    ImageVersions,
    Inventory,
    Mount,
    Node,
    RunDefaults,
    SlurmSpec,
)
from clusterctl.inventory.types import parse_cpu_list

__all__ = [
    "FabricSpec",
    "ImageVersions",
    "Inventory",
    "Mount",
    "Node",
    "RunDefaults",
    "SlurmSpec",
    "format_loc",
    "inventory_schema",
    "load_inventory",
    "parse_cpu_list",
    "validate_document",
]
