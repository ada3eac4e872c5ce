"""YAML loading that keeps line numbers, so validation errors can point at the line to fix.

Input is bounded before anything is built from it: only a regular file is read, and at most
``MAX_BYTES`` of it; lines, nesting depth, collection lengths and alias expansion have limits
(``YamlLimits``), checked on the parser's event stream as the document is parsed (once), before
anything is constructed from it. Every refusal is an ``InputError`` naming the file, the line, the limit and
the fix.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    MappingStartEvent,
    ScalarEvent,
)
from ruamel.yaml.parser import RoundTripParser

from clusterctl.errors import InputError
from clusterctl.readfile import read_capped


@dataclass(frozen=True)
class YamlLimits:
    """What a YAML document clusterctl reads may hold. The defaults fit any real inventory many times over."""

    max_bytes: int = 1 << 20
    max_line_chars: int = 10_000
    max_depth: int = 32
    max_collection_items: int = 4_096
    max_aliases: int = 256
    max_nodes: int = 200_000  # scalars and collections after every alias is expanded
    # Digits of an unquoted integer: Python refuses to convert more than 4,300 (a ValueError inside the
    # YAML library), and no inventory number has more than a few.
    max_integer_digits: int = 100


LIMITS = YamlLimits()

_UNICODE_BOMS = {
    codecs.BOM_UTF32_LE: "UTF-32",
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as UTF-8 text (a UTF-8 BOM is dropped).

    Raises:
        InputError: a UTF-16/32 file or bytes that are not UTF-8, naming the line of the first bad byte.
    """
    for bom, name in _UNICODE_BOMS.items():
        if data.startswith(bom):
            raise InputError(
                f"{path}: is {name} encoded (it starts with a {name} byte-order mark). "
                "Fix: save the file as UTF-8."
            )
    try:
        return data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}). "
            "Fix: save the file as UTF-8 and write only UTF-8 characters."
        ) from None


def _limit_error(path: Path, line: int, what: str, fix: str) -> InputError:
    return InputError(f"{path}, line {line + 1}: {what}. Fix: {fix}.")


class _EventLimits:
    """Refuses a document over any of ``limits`` as its parser's events go by; never builds anything.

    Tracks nesting depth, items per open collection, aliases, and the size of every anchored node so
    that an alias adds what it would expand to (billion-laughs documents are refused before they grow).
    An alias to an anchor whose node is still open (a node that contains itself) is refused too.
    """

    def __init__(self, path: Path, limits: YamlLimits):
        self.path, self.limits = path, limits
        self.stack: list[
            list[Any]
        ] = []  # per open collection: [anchor, items, expanded size, line, start event]
        self.sizes: dict[str, int] = {}
        self.aliases = 0
        self.total = 0

    def _add(self, size: int, line: int) -> None:
        limits = self.limits
        self.total += size
        if self.total > limits.max_nodes:
            raise _limit_error(
                self.path, line, f"the document expands to more than {limits.max_nodes} values (alias "
                "expansion limit)", "write the values out instead of nesting aliases of aliases",
            )  # fmt: skip
        if self.stack:
            top = self.stack[-1]
            top[1] += 1
            top[2] += size
            if top[1] > limits.max_collection_items * (2 if isinstance(top[4], MappingStartEvent) else 1):
                raise _limit_error(
                    self.path, top[3], f"a collection has more than {limits.max_collection_items} entries "
                    "(collection length limit)", "no inventory list or mapping needs that many; remove entries",
                )  # fmt: skip

    def feed(self, event: Any) -> None:
        """Account for one parser event; raises ``InputError`` when it takes the document over a limit."""
        path, limits = self.path, self.limits
        line = event.start_mark.line if event.start_mark is not None else 0
        if isinstance(event, AliasEvent):
            self.aliases += 1
            if self.aliases > limits.max_aliases:
                raise _limit_error(
                    path, line, f"more than {limits.max_aliases} aliases (alias limit)",
                    "write the values out instead of referring to anchors",
                )  # fmt: skip
            if event.anchor not in self.sizes:
                raise _limit_error(
                    path, line, f"alias *{event.anchor} refers to a node that contains it (or to no anchor)",
                    f"refer to &{event.anchor} only after its value has ended",
                )  # fmt: skip
            self._add(self.sizes[event.anchor], line)
        elif isinstance(event, ScalarEvent):
            digits = event.value.lstrip("+-").replace("_", "")
            if event.style is None and len(digits) > limits.max_integer_digits and digits.isdigit():
                raise _limit_error(
                    path, line, f"a number of {len(digits)} digits, over the limit of {limits.max_integer_digits} "
                    "(number length limit)", "write the number the field needs, or put text in quotes",
                )  # fmt: skip
            self._add(1, line)
            if event.anchor:
                self.sizes[event.anchor] = 1
        elif isinstance(event, CollectionStartEvent):
            if len(self.stack) >= limits.max_depth:
                raise _limit_error(
                    path, line, f"nested more than {limits.max_depth} levels deep (nesting limit)",
                    "an inventory is a few levels deep; flatten the structure",
                )  # fmt: skip
            self.stack.append([event.anchor, 0, 1, line, event])
        elif isinstance(event, CollectionEndEvent) and self.stack:
            anchor, _, size, _, _ = self.stack.pop()
            if anchor:
                self.sizes[anchor] = size
            self._add(size, line)


def _limited_loader(path: Path, limits: YamlLimits) -> YAML:
    """ruamel's round-trip loader whose parser hands every event to an ``_EventLimits`` first.

    The composer takes each event through ``get_event`` and builds the whole node graph (an alias is
    a reference, not a copy) before anything is constructed, so a document over a limit is refused
    after at most one event too many, in the same single pass that parses it.
    """
    checker = _EventLimits(path, limits)

    class LimitedParser(RoundTripParser):
        def get_event(self) -> Any:
            event = super().get_event()
            checker.feed(event)
            return event

    yaml = YAML(typ="rt")
    yaml.Parser = LimitedParser
    return yaml


def parse_yaml_text(path: Path, text: str, limits: YamlLimits = LIMITS) -> Any:
    """Parse ``text`` (read from ``path``) with ruamel's round-trip loader, within ``limits``.

    Raises:
        InputError: a line, the nesting, a collection or the alias expansion over its limit, or not YAML.
    """
    for number, line in enumerate(text.split("\n")):
        if len(line) > limits.max_line_chars:
            raise _limit_error(
                path, number, f"the line is {len(line)} characters long, over the limit of "
                f"{limits.max_line_chars} (line length limit)", "break the value or comment over several lines",
            )  # fmt: skip
    try:
        return _limited_loader(path, limits).load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = (getattr(exc, "problem", None) or str(exc)).splitlines()[0]
        problem = problem if len(problem) <= 200 else problem[:200] + "..."
        raise InputError(
            f"{path}{where}: not valid YAML ({problem}). Fix: correct the YAML syntax there."
        ) from None
    except RecursionError:  # a merge key cycle the event walk cannot see
        raise InputError(
            f"{path}: the document refers to itself through anchors and merge keys. Fix: write the values "
            "out instead of merging a mapping into itself."
        ) from None


def load_yaml(path: Path, limits: YamlLimits = LIMITS) -> Any:
    """Read ``path`` (a regular UTF-8 file within ``limits.max_bytes``) and parse it within ``limits``.

    Mappings remember their line numbers (ruamel's round-trip loader).

    Raises:
        InputError: the file is missing, unreadable, not a regular file, too large, not UTF-8, over a
            limit or not YAML; the message names the file, the line and the fix.
    """
    data = read_capped(path, limits.max_bytes, "check the path, or run `clusterctl sandbox up`")
    return parse_yaml_text(path, decode_utf8(path, data), limits)


def line_of(document: Any, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest element of ``loc`` found in ``document``, or None.

    ``loc`` is a pydantic error location such as ``("nodes", 1, "fabric", "address")``; when the
    element is absent (a missing key) the line of its nearest present parent is returned. A key that
    came in through a merge key (``<<: *defaults``) has no line of its own: its parent's is returned.
    """
    line: int | None = None
    node = document
    for key in loc:
        if (isinstance(node, CommentedMap) and isinstance(key, str) and key in node) or (
            isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node)
        ):
            position = (node.lc.data or {}).get(key)
        else:
            break
        if position is None:
            break
        line = position[0] + 1
        node = node[key]
    return line
