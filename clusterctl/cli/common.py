"""Helpers every command uses: consoles, the inventory option and its default, JSON output."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console

from clusterctl.errors import InputError
from clusterctl.paths import data_dir, state_dir

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory

T = TypeVar("T")

# emoji=False: no ":name:" in a path or a message becomes an emoji (and rich's emoji table is not loaded).
console = Console(soft_wrap=True, emoji=False)
err_console = Console(stderr=True, soft_wrap=True, emoji=False)

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
    # Imported on use: pydantic and the model are the largest part of the CLI's start-up.
    from clusterctl.inventory import load_inventory

    return load_inventory(resolve_inventory_path(given))


def print_json(data: Any) -> None:
    """Machine output on stdout: plain JSON, no colour, no wrapping."""
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def split_option(value: str, option: str, convert: Callable[[str], T], expected: str) -> list[T]:
    """The comma-separated items of ``option``'s ``value``, each passed through ``convert``.

    Args:
        value: what was given, e.g. ``"1,2,4"``.
        option: the option's name for the message, e.g. ``"--gpus"``.
        convert: turns one item into its value; raises ValueError for an item it refuses.
        expected: what one item should be, for the message, e.g. ``"a whole number of at least 1"``.

    Raises:
        typer.BadParameter: an empty item or one ``convert`` refuses (a usage error: exit 2, the option
            named, click's usage line).
    """
    items = [item.strip() for item in value.split(",")]
    converted = []
    for item in items:
        try:
            if not item:
                raise ValueError(item)
            converted.append(convert(item))
        except ValueError:
            raise typer.BadParameter(
                f"{value!r}: item {item!r} is not {expected}. Fix: give comma-separated values, each "
                f"{expected}.",
                param_hint=f"'{option}'",
            ) from None
    return converted


def positive_int(text: str) -> int:
    """``text`` as a whole number of at least 1; ValueError otherwise."""
    number = int(text)
    if number < 1:
        raise ValueError(text)
    return number
