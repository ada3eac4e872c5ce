"""Where a problem is: an inventory's validation errors as one line each naming file, line, field and fix.

A value a node inherits from ``cluster.defaults`` is pointed at there; a rule's message reads "what is
wrong; what to do"; each distinct problem is listed once, at most ``MAX_PROBLEMS_SHOWN`` of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clusterctl.errors import InventoryError
from clusterctl.inventory.rules import InventoryRuleError, Loc
from clusterctl.inventory.types import shown
from clusterctl.yamlio import line_of

_HINTS = {
    "extra_forbidden": "remove the key or correct its spelling (`clusterctl inventory schema` lists the allowed keys)",
    "missing": "add this field",
    "literal_error": "use one of the allowed values",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "greater_than": "use a larger value",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "too_short": "add at least one entry",
    "ip_v4_interface": "write an IPv4 address with its prefix, e.g. 192.168.11.1/24",
    "less_than": "use a smaller value",
    "int_from_float": "write a whole number",
    "float_type": "write a number",
    "float_parsing": "write a number",
    "finite_number": "write a finite number (not .nan or .inf)",
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "string_type": "write the value as text (in quotes if YAML would read it as a number or boolean)",
    "string_pattern_mismatch": "use only the characters the pattern allows",
    "string_too_long": "shorten the value",
    "too_long": "remove entries",
    "list_type": "write a list (one '- item' line per entry)",
    "dict_type": "write a mapping (one 'key: value' line per entry)",
    "model_type": "write a mapping (one 'key: value' line per entry)",
}
# The hint of an error type not listed above.
_DEFAULT_HINT = "correct the value (`clusterctl inventory schema` describes every field)"
# Problems listed in one message; the rest are counted (a file with 10,000 bad entries stays readable).
MAX_PROBLEMS_SHOWN = 20


def format_loc(loc: Sequence[str | int]) -> str:
    """``("nodes", 1, "fabric")`` as ``nodes[1].fabric``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:  # a key the user wrote may hold anything: quote it unless it is a plain word
            name = part if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", part) else shown(part)
            out += f".{name}" if out else name
    return out or "(top level)"


def _has_path(document: Any, loc: Loc) -> bool:
    node = document
    for key in loc:
        in_map = isinstance(node, dict) and isinstance(key, str) and key in node
        in_list = isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)
        if not (in_map or in_list):
            return False
        node = node[key]
    return True


def _locate(document: Any, loc: Loc) -> tuple[Loc, int | None]:
    """Where to point the user: a node value inherited from ``cluster.defaults`` points there."""
    if len(loc) >= 3 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = document.get("nodes") if isinstance(document, dict) else None
        node = nodes[loc[1]] if isinstance(nodes, list) and loc[1] < len(nodes) else None
        defaults_loc: Loc = ("cluster", "defaults", *loc[2:])
        if isinstance(node, dict) and not _has_path(node, loc[2:]) and _has_path(document, defaults_loc):
            return defaults_loc, line_of(document, defaults_loc)
    return loc, line_of(document, loc)


def _message(path: Path, document: Any, loc: Loc, msg: str, hint: str | None) -> str:
    if hint is None and "; " in msg:  # rule messages read "what is wrong; what to do"
        msg, hint = msg.rsplit("; ", 1)
    where_loc, line = _locate(document, loc)
    where = f"{path}, line {line}" if line else str(path)
    return f"{where}, field {format_loc(where_loc)}: {msg}. Fix: {hint or _DEFAULT_HINT}."


def _problems_error(lines: list[str]) -> InventoryError:
    """One error listing each distinct problem once (a bad inherited default is named once, not per node)."""
    distinct = list(dict.fromkeys(lines))
    shown_lines = distinct[:MAX_PROBLEMS_SHOWN]
    if len(distinct) > MAX_PROBLEMS_SHOWN:
        shown_lines.append(f"... and {len(distinct) - MAX_PROBLEMS_SHOWN} more problems like these.")
    return InventoryError("\n".join(shown_lines))


def located_error(path: Path, document: Any, exc: InventoryRuleError | ValidationError) -> InventoryError:
    """The ``InventoryError`` for the problems of validating ``document`` (read from ``path``) as an inventory.

    One line per distinct problem, each naming file, line, field and fix.
    """
    if isinstance(exc, InventoryRuleError):
        lines = [_message(path, document, loc, msg, None) for loc, msg in exc.problems]
    else:
        lines = []
        for err in exc.errors(include_url=False, include_input=False):
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(_message(path, document, tuple(err["loc"]), msg, _HINTS.get(err["type"])))
    return _problems_error(lines)
