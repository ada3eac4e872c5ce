"""The generated pages of the documentation site: the inventory reference and the CLI reference.

An MkDocs hook (``hooks:`` in mkdocs.yml): a page that holds one of the markers below gets the marker
replaced, at build time, by a reference generated from the code, so neither can drift from it:

- ``<!-- generated: inventory-reference -->``: every model of the inventory, from the JSON schema that
  ``clusterctl inventory schema`` prints (field, type and constraints, default, description);
- ``<!-- generated: cli-reference -->``: every command of the Typer app in ``--help`` order (usage,
  help text, arguments and options with type, default and help), walked as a click command tree.

``python scripts/docs_reference.py inventory|cli`` prints either one, for a look without a build.
Typed, and checked by mypy with the rest (pyproject.toml's ``[tool.mypy] files``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

INVENTORY_MARKER = "<!-- generated: inventory-reference -->"
CLI_MARKER = "<!-- generated: cli-reference -->"

JsonSchema = dict[str, Any]


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: one line, no column breaks, no raw HTML."""
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """``text`` as inline code inside a table cell."""
    return f"`{text.replace('|', '¦')}`"


# ---------------------------------------------------------------------------------------------------
# Inventory reference


def inventory_schema() -> JsonSchema:
    """The inventory's JSON schema, as the CLI prints it (the public form: no internal module named)."""
    done = subprocess.run(
        [sys.executable, "-m", "clusterctl", "inventory", "schema"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"clusterctl inventory schema exited {done.returncode}: {done.stderr.strip()}")
    schema: JsonSchema = json.loads(done.stdout)
    return schema


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(model: str) -> str:
    return "model-" + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def _constraints(prop: JsonSchema) -> str:
    parts: list[str] = []
    low, high = prop.get("minimum"), prop.get("maximum")
    if "exclusiveMinimum" in prop:
        parts.append(f"> {prop['exclusiveMinimum']}")
    elif low is not None:
        parts.append(f">= {low}")
    if high is not None:
        parts.append(f"<= {high}")
    if "minItems" in prop:
        parts.append(f"at least {prop['minItems']} items")
    if "maxLength" in prop:
        parts.append(f"at most {prop['maxLength']} characters")
    if "pattern" in prop:
        parts.append(f"matches {_code(prop['pattern'])}")
    if "format" in prop:
        parts.append(f"format {prop['format']}")
    return ", ".join(parts)


def _type(prop: JsonSchema) -> str:
    """A field's type as a cell: models link to their section, enums list their values."""
    if "$ref" in prop:
        name = _ref_name(prop["$ref"])
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in prop:
        return " or ".join(_type(option) for option in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(_code(json.dumps(value)) for value in prop["enum"])
    if "const" in prop:
        return _code(json.dumps(prop["const"]))
    kind = prop.get("type", "any")
    values = prop.get("additionalProperties")
    if kind == "array":
        text = f"list of {_type(prop.get('items', {}))}"
    elif kind == "object" and isinstance(values, dict):  # a mapping, e.g. workload name -> its settings
        keys = prop.get("propertyNames", {}).get("enum")
        named = " \\| ".join(_code(str(key)) for key in keys) if keys else "string"
        text = f"map of {named} to {_type(values)}"
    elif kind == "null":
        return "null"
    else:
        text = str(kind)
    extra = _constraints(prop)
    return f"{text} ({extra})" if extra else text


def _default(name: str, prop: JsonSchema, required: list[str]) -> str:
    if name in required:
        return "**required**"
    if "default" in prop:
        return _code(json.dumps(prop["default"]))
    if "$ref" in prop:
        return "its fields' defaults"
    if prop.get("type") == "array":
        return _code("[]")
    return ""


def _models_in_order(schema: JsonSchema) -> Iterator[tuple[str, str]]:
    """(model name, the first path it is used at), breadth first from the root."""
    defs: dict[str, JsonSchema] = schema.get("$defs", {})
    seen: set[str] = set()
    queue: list[tuple[str, JsonSchema, str]] = [("Inventory", schema, "")]
    while queue:
        name, model, path = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        yield name, path
        for field, prop in model.get("properties", {}).items():
            for ref in _refs(prop):
                child = _ref_name(ref)
                suffix = _suffix(prop)
                queue.append((child, defs[child], f"{path}.{field}{suffix}".lstrip(".")))


def _suffix(prop: JsonSchema) -> str:
    """What a field's path gets for the model inside it: ``[]`` for a list's items, ``.<name>`` for a map's."""
    if prop.get("type") == "array":
        return "[]"
    return ".<name>" if isinstance(prop.get("additionalProperties"), dict) else ""


def _refs(prop: JsonSchema) -> Iterator[str]:
    if "$ref" in prop:
        yield prop["$ref"]
    if isinstance(prop.get("additionalProperties"), dict):
        yield from _refs(prop["additionalProperties"])
    for option in prop.get("anyOf", []):
        yield from _refs(option)
    if "items" in prop:
        yield from _refs(prop["items"])


def _uses(schema: JsonSchema) -> dict[str, list[str]]:
    """Every path at which each model is used."""
    defs: dict[str, JsonSchema] = schema.get("$defs", {})
    uses: dict[str, list[str]] = {}

    def walk(model: JsonSchema, path: str, depth: int) -> None:
        if depth > 8:
            return
        for field, prop in model.get("properties", {}).items():
            for ref in _refs(prop):
                child = _ref_name(ref)
                suffix = _suffix(prop)
                where = f"{path}.{field}{suffix}".lstrip(".")
                uses.setdefault(child, []).append(where)
                walk(defs[child], where, depth + 1)

    walk(schema, "", 0)
    return uses


def inventory_reference(schema: JsonSchema | None = None) -> str:
    """The inventory reference in Markdown: one section and one table per model."""
    schema = schema if schema is not None else inventory_schema()
    defs: dict[str, JsonSchema] = schema.get("$defs", {})
    uses = _uses(schema)
    out: list[str] = []
    for name, _path in _models_in_order(schema):
        model = schema if name == "Inventory" else defs[name]
        out.append(f"## {name} {{#{_anchor(name)}}}")
        out.append("")
        if model.get("description"):
            out.append(" ".join(str(model["description"]).split()))
            out.append("")
        if name in uses:
            places = ", ".join(f"`{p}`" for p in dict.fromkeys(uses[name]))
            out.append(f"Used at: {places}.")
            out.append("")
        out.append("| field | type | default | description |")
        out.append("|---|---|---|---|")
        required = list(model.get("required", []))
        for field, prop in model.get("properties", {}).items():
            description = _cell(str(prop.get("description", "")))
            out.append(f"| `{field}` | {_type(prop)} | {_default(field, prop, required)} | {description} |")
        out.append("")
        if model.get("additionalProperties") is False:
            out.append("Unknown keys are errors.")
            out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# CLI reference


def _walk_commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, click command) of every command under ``command``, in the order ``--help`` lists them."""
    yield path, command
    if hasattr(command, "commands"):
        ctx = command.make_context(" ".join(path) or "clusterctl", [], resilient_parsing=True)
        for name in command.list_commands(ctx):
            yield from _walk_commands(command.commands[name], (*path, name))


def _param_type(param: Any) -> str:
    choices = getattr(param.type, "choices", None)
    if choices:
        return " \\| ".join(_code(str(getattr(c, "value", c))) for c in choices)
    if getattr(param, "is_flag", False):
        return "flag"
    name = str(getattr(param.type, "name", "text"))
    return name + (" (repeatable)" if getattr(param, "multiple", False) else "")


def _param_default(param: Any) -> str:
    if getattr(param, "required", False):
        return "**required**"
    default = getattr(param, "default", None)
    if callable(default):
        return "computed"
    if default is None or default == () or default == []:
        return ""
    if getattr(param, "is_flag", False) and default is False:
        return ""
    return _code(str(getattr(default, "value", default)))


def _usage(path: tuple[str, ...], command: Any) -> str:
    pieces = ["clusterctl", *path]
    if any(p.param_type_name == "option" for p in command.params):
        pieces.append("[OPTIONS]")
    for param in command.params:
        if param.param_type_name == "argument":
            metavar = param.name.upper() + ("..." if param.nargs == -1 else "")
            pieces.append(metavar if param.required else f"[{metavar}]")
    if hasattr(command, "commands"):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _help_paragraphs(text: str) -> str:
    """A docstring's help as Markdown paragraphs (click's ``\\b`` no-rewrap marker dropped)."""
    lines = text.replace("\b", "").strip().splitlines()
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(_cell(p).replace("\\|", "|") for p in paragraphs)


def cli_reference() -> str:
    """The CLI reference in Markdown: one section per command, in ``--help`` order."""
    import typer.main

    from clusterctl.cli import app

    root = typer.main.get_command(app)
    out: list[str] = []
    for path, command in _walk_commands(root, ()):
        title = " ".join(("clusterctl", *path))
        out.append(f"{'#' * min(2 + len(path), 4)} {title}")
        out.append("")
        out.append("```text")
        out.append(_usage(path, command))
        out.append("```")
        out.append("")
        if command.help:
            out.append(_help_paragraphs(command.help))
            out.append("")
        if hasattr(command, "commands"):
            ctx = command.make_context(title, [], resilient_parsing=True)
            subcommands = ", ".join(f"`{name}`" for name in command.list_commands(ctx))
            out.append(f"Commands: {subcommands}.")
            out.append("")
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            out.append("| argument or option | type | default | help |")
            out.append("|---|---|---|---|")
            for param in params:
                opts = [*param.opts, *getattr(param, "secondary_opts", [])]
                label = (
                    " / ".join(f"`{n}`" for n in opts)
                    if param.param_type_name == "option"
                    else f"`{param.name.upper()}`"
                )
                help_text = _cell(str(getattr(param, "help", None) or ""))
                out.append(f"| {label} | {_param_type(param)} | {_param_default(param)} | {help_text} |")
            out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------
# The MkDocs hook


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace the markers of a page with the references generated from the code."""
    if INVENTORY_MARKER in markdown:
        markdown = markdown.replace(INVENTORY_MARKER, inventory_reference())
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    return markdown


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which not in ("inventory", "cli"):
        print("usage: python scripts/docs_reference.py inventory|cli", file=sys.stderr)
        sys.exit(2)
    print(inventory_reference() if which == "inventory" else cli_reference())
