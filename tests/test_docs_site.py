"""The README stays the front door and the documentation site stays whole (issue 24 item 4).

Cheap checks that can fail without building the site (scripts/test.sh builds it with ``mkdocs build
--strict`` after mypy): the README is short and holds the two commands; every page under docs/ is in
mkdocs.yml's nav and every nav entry exists; the generated references cover every command and every
inventory model; the bench outputs the docs cite exist.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import typer.main
from ruamel.yaml import YAML

from clusterctl.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
TWO_COMMANDS = ("bash scripts/quickstart.sh", "bash scripts/test.sh")
README_MAX_LINES = 220


def _reference_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_reference", module)
    spec.loader.exec_module(module)
    return module


def _nav_pages(entry: Any) -> Iterator[str]:
    if isinstance(entry, str):
        yield entry
    elif isinstance(entry, dict):
        for value in entry.values():
            yield from _nav_pages(value)
    elif isinstance(entry, list):
        for item in entry:
            yield from _nav_pages(item)


def _mkdocs_config() -> dict[str, Any]:
    config: dict[str, Any] = YAML(typ="safe").load((ROOT / "mkdocs.yml").read_text())
    return config


def test_readme_is_the_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the reference belongs in docs/"
    for command in TWO_COMMANDS:
        assert command in (line.strip() for line in lines), f"README.md lost `{command}`"
    for page in ("docs/reference/cli.md", "docs/reference/inventory.md"):
        assert f"({page})" in README.read_text(), f"README.md does not point to {page}"


def test_readme_links_point_at_files_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = _mkdocs_config()
    assert config["docs_dir"] == "docs"
    nav = set(_nav_pages(config["nav"]))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - nav == set(), f"pages under docs/ missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries without a page: {sorted(nav - pages)}"
    for stage in (
        "inventory",
        "provision",
        "image",
        "up",
        "run",
        "report",
        "check",
        "sandbox",
        "slurm",
        "reliability",
        "performance",
    ):
        assert f"{stage}.md" in pages, f"the {stage} stage has no page"
    assert {"DESIGN.md", "STYLE-NOTES.md"} <= nav


def test_the_test_command_builds_the_site_strictly() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(r"mkdocs build --strict", script)
    assert script.index("mkdocs build") > script.index(".venv/bin/mypy")
    assert "/site/" in (ROOT / ".gitignore").read_text().splitlines()


def test_reference_pages_hold_their_markers() -> None:
    reference = _reference_module()
    assert reference.CLI_MARKER in (DOCS / "reference" / "cli.md").read_text()
    assert reference.INVENTORY_MARKER in (DOCS / "reference" / "inventory.md").read_text()
    hooks = _mkdocs_config().get("hooks", [])
    assert "scripts/docs_reference.py" in hooks


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def test_cli_reference_covers_every_command_and_option() -> None:
    text = _reference_module().cli_reference()
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    root = typer.main.get_command(app)
    for path in _command_paths(root):
        assert " ".join(("clusterctl", *path)) in headings
    run = root.commands["run"]  # type: ignore[attr-defined]
    for param in run.params:
        for opt in param.opts:
            if opt.startswith("-"):
                assert f"`{opt}`" in text


def test_inventory_reference_covers_every_model_and_field() -> None:
    reference = _reference_module()
    schema = reference.inventory_schema()
    text = reference.inventory_reference(schema)
    for name, model in [("Inventory", schema), *schema["$defs"].items()]:
        assert f"## {name} " in text, f"model {name} missing from the inventory reference"
        for field in model.get("properties", {}):
            assert f"| `{field}` |" in text
    assert "| `sshd_port` | integer (>= 1, <= 65535) | `50000` |" in text


def test_bench_outputs_the_docs_cite_exist() -> None:
    texts = [README.read_text(), *(p.read_text() for p in DOCS.rglob("*.md"))]
    texts.append((ROOT / "bench" / "README.md").read_text())
    cited = {m for text in texts for m in re.findall(r"bench/results/[\w.-]+\.(?:json|md)", text)}
    assert cited, "no bench output cited anywhere"
    missing = sorted(c for c in cited if not (ROOT / c).exists())
    assert not missing, f"cited bench outputs that do not exist: {missing}"
    assert (ROOT / "bench" / "results" / "HISTORY.md").exists()
