"""Loading an inventory: read the YAML, validate it, and report every problem with its location."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clusterctl.errors import InventoryError
from clusterctl.inventory.location import located_error
from clusterctl.inventory.models import Inventory
from clusterctl.inventory.rules import InventoryRuleError, cross_field_problems
from clusterctl.yamlio import load_yaml


def validate_document(document: Any, path: Path) -> Inventory:
    """Validate a parsed YAML document as an inventory from ``path``: every field (pydantic), then the
    cross-field rules (``rules.RULES``).

    Relative controller paths in it (``provision.mofed_tarball_path``) are resolved against ``path``'s
    directory.

    Raises:
        InventoryError: with one line per problem, each naming file, line, field and fix.
    """
    if not isinstance(document, dict):
        raise InventoryError(
            f"{path}: not an inventory (the document is {type(document).__name__}, not a mapping). Fix: write a "
            "mapping with the keys cluster and nodes (and optionally container, image, run, provision); "
            "inventories/sandbox-example.yml shows one."
        )
    try:
        inventory = Inventory.model_validate(document, context={"inventory_dir": path.parent})
        problems = cross_field_problems(inventory)
        if problems:
            raise InventoryRuleError(problems)
    except (InventoryRuleError, ValidationError) as exc:
        raise located_error(path, document, exc) from None
    inventory._source = path
    return inventory


def load_inventory(path: Path | str) -> Inventory:
    """Read and validate the inventory at ``path``.

    Raises:
        InputError: the file is missing or not YAML.
        InventoryError: the content does not validate; the message names file, line, field and fix.
    """
    path = Path(path)
    return validate_document(load_yaml(path), path)


def inventory_schema() -> dict[str, Any]:
    """The JSON schema of the inventory format, for editors and for documentation."""
    return Inventory.model_json_schema()
