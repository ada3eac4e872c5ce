"""Helpers every command uses: consoles, the inventory option and its default, JSON output."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from clusterctl.errors import InputError
from clusterctl.paths import data_dir
from clusterctl.terminal import safe_text

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
    from clusterctl.sandbox.state import sandbox_files  # on use: the state model loads pydantic

    sandbox = sandbox_files().inventory
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


def markup_safe(text: str) -> str:
    """``text`` for a rich markup string: controls shown as ``\\xNN`` (``safe_text``), markup escaped."""
    return escape(safe_text(text))


def _finite_json(data: Any, where: str, replaced: list[str]) -> Any:
    """``data`` with every non-finite float (NaN, Infinity) replaced by None, its place added to ``replaced``."""
    if isinstance(data, float) and not math.isfinite(data):
        replaced.append(f"{where or '(top)'} was {data}")
        return None
    if isinstance(data, dict):
        return {
            key: _finite_json(value, f"{where}.{key}" if where else str(key), replaced)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [_finite_json(value, f"{where}[{i}]", replaced) for i, value in enumerate(data)]
    return data


def print_json(data: Any) -> None:
    """Machine output on stdout: strict JSON (RFC 8259), no colour, no wrapping.

    A value that is not a finite number (NaN, Infinity, or a figure that overflowed to them) is written
    as null, and each such place is named on stderr with the value it had.
    """
    replaced: list[str] = []
    text = json.dumps(
        _finite_json(data, "", replaced), indent=2, sort_keys=False, default=str, allow_nan=False
    )
    print(text)
    if replaced:
        shown = "; ".join(replaced[:5]) + (f"; and {len(replaced) - 5} more" if len(replaced) > 5 else "")
        warn(f"--json: {len(replaced)} values were not finite numbers and are written as null: {shown}")


def warn(message: str) -> None:
    """A warning on stderr, control characters shown escaped (``safe_text``)."""
    err_console.print(f"warning: {safe_text(message)}", markup=False, highlight=False, soft_wrap=True)


def output_file(path: Path, option: str, *, suffix: str | None = None) -> Path:
    """``path``, checked as the file an output option writes, before anything is computed.

    Raises:
        InputError: ``path`` is a directory, exists and is not a regular file (a device, a FIFO), lies
            in a directory that does not exist, or (with ``suffix``) does not end in ``suffix``.
    """
    problem, fix = None, "name a regular file in an existing directory"
    if suffix and path.suffix.lower() != suffix:
        problem = f"does not end in {suffix} (the file is written to exactly the name given)"
        fix = f"name a file such as report{suffix}"
    elif path.is_dir():
        problem, fix = "is a directory", f"name a file in it, e.g. {path / ('report' + (suffix or '.csv'))}"
    elif path.exists() and not path.is_file():
        problem = "exists and is not a regular file (a device or a FIFO)"
    elif not path.parent.is_dir():
        problem, fix = (
            f"is in {path.parent}, which is not a directory",
            "create the directory first, or " + fix,
        )
    if problem:
        raise InputError(f"{option} {safe_text(str(path))}: {problem}. Fix: {fix}.")
    return path


def output_dir(path: Path, option: str) -> Path:
    """``path``, checked as the directory an output option writes into (made when missing), before
    anything is computed.

    Raises:
        InputError: ``path`` exists and is not a directory, or its parent is not a directory.
    """
    if path.exists() and not path.is_dir():
        problem = "exists and is not a directory"
    elif not path.exists() and not path.parent.is_dir():
        problem = f"is in {path.parent}, which is not a directory"
    else:
        return path
    raise InputError(f"{option} {safe_text(str(path))}: {problem}. Fix: name a directory (it is made when "
                     "missing, in an existing directory); the page is written as index.html in it.")  # fmt: skip


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn an OSError raised while the file ``option`` names is written into an InputError naming both.

    Raises:
        InputError: it cannot be written (a full disk, no permission).
    """
    try:
        yield
    except OSError as exc:
        raise InputError(
            f"{option} {safe_text(str(path))}: cannot be written ({exc.strerror}). Fix: name a file on a disk "
            "with space that you can write."
        ) from None


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


# The longest --timeout: a week. A run longer than that is a hang, and nan, inf and 1e309 (inf) are no time.
MAX_TIMEOUT_S = 7 * 86400.0


def finite_seconds(value: float | None) -> float | None:
    """A --timeout's callback: the seconds given, refused unless a finite number up to ``MAX_TIMEOUT_S``.

    Raises:
        typer.BadParameter: nan, inf (1e309 reads as inf) or more than a week (a usage error: exit 2).
    """
    if value is not None and not (math.isfinite(value) and value <= MAX_TIMEOUT_S):
        raise typer.BadParameter(f"{value!r} is not a number of seconds up to {MAX_TIMEOUT_S:g} (a week). Fix: give "
                                 "the seconds as a plain number, e.g. 3600.")  # fmt: skip
    return value


def positive_int(text: str) -> int:
    """``text`` as a whole number of at least 1; ValueError otherwise."""
    number = int(text)
    if number < 1:
        raise ValueError(text)
    return number
