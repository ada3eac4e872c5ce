"""The inventory: one YAML file describing the cluster, validated once at load by pydantic v2.

The package's face: the models and the loader that the rest of clusterctl imports.
"""

from clusterctl.inventory.models import (
    FabricSpec,
    ImageVersions,
    Inventory,
    Mount,
    Node,
    RunDefaults,
    SlurmSpec,
    format_loc,
    inventory_schema,
    load_inventory,
    parse_cpu_list,
    validate_document,
)

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
