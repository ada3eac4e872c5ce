"""YAML loading that keeps line numbers, so validation errors can point at the line to fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from clusterctl.errors import InputError


def load_yaml(path: Path) -> Any:
    """Parse ``path`` with ruamel's round-trip loader (mappings remember their line numbers).

    Raises:
        InputError: the file is missing, unreadable or not YAML; the message names the file and line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file. Fix: check the path, or run `clusterctl sandbox up`."
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}).") from None
    try:
        return YAML(typ="rt").load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}{where}: not valid YAML ({problem}). Fix the syntax there.") from None


def line_of(document: Any, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest element of ``loc`` found in ``document``, or None.

    ``loc`` is a pydantic error location such as ``("nodes", 1, "fabric", "address")``; when the
    element is absent (a missing key) the line of its nearest present parent is returned.
    """
    line: int | None = None
    node = document
    for key in loc:
        if isinstance(node, CommentedMap) and isinstance(key, str) and key in node:
            line = node.lc.key(key)[0] + 1
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
            line = node.lc.item(key)[0] + 1
            node = node[key]
        else:
            break
    return line
