"""Helpers every command uses: consoles, the inventory option and its default, JSON output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir, state_dir

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

INVENTORY_ENV = "CLUSTERCTL_INVENTORY"

InventoryOption = typer.Option(
    None,
    "--inventory",
    "-i",
    help=f"Inventory file. Default: ${INVENTORY_ENV}, else the running sandbox's inventory.",
    show_default=False,
)


def sandbox_inventory_path() -> Path:
    """Where `clusterctl sandbox up` writes the inventory of the local sandbox."""
    return state_dir() / "sandbox" / "inventory.yml"


def _shipped_example(given: Path) -> Path:
    """``inventories/NAME.yml`` (or ``NAME.yml``) names a shipped example when no such file is here."""
    shipped = data_dir("inventories") / given.name
    if given.parent in (Path("."), Path("inventories")) and shipped.is_file():
        return shipped
    return given


def resolve_inventory_path(given: Path | None) -> Path:
    """The inventory a command uses: the option, else $CLUSTERCTL_INVENTORY, else the sandbox's.

    Raises:
        InputError: none of them exists; the message says how to get one.
    """
    if given is not None:
        try:
            exists = given.exists()
        except OSError:  # e.g. a name too long to look up: load_inventory names the problem
            exists = True
        return given if exists else _shipped_example(given)
    from_env = os.environ.get(INVENTORY_ENV)
    if from_env:
        return Path(from_env)
    sandbox = sandbox_inventory_path()
    if sandbox.is_file():
        return sandbox
    raise InputError(
        f"no inventory given. Fix: pass -i FILE, set {INVENTORY_ENV}, or start the local sandbox with "
        "`clusterctl sandbox up` (its inventory becomes the default)."
    )


def load(given: Path | None) -> Inventory:
    """Resolve and load the inventory a command works on."""
    return load_inventory(resolve_inventory_path(given))


def print_json(data: Any) -> None:
    """Machine output on stdout: plain JSON, no colour, no wrapping."""
    print(json.dumps(data, indent=2, sort_keys=False, default=str))
