"""docs/DESIGN.md and docs/STYLE-NOTES.md cite the code by name: every module they name exists where they
say, and a name cited with its module (`hosts/command.py` `CommandResult`, or `CommandResult`
(`hosts/command.py`)) is defined there. A rename that leaves the map behind fails here (issue 39)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clusterctl"
DOCS = ("docs/DESIGN.md", "docs/STYLE-NOTES.md")
MODULE = r"`((?:[a-z_]+/)*[a-z_]+\.py)`"
NAME = r"`([A-Za-z_][A-Za-z0-9_]*)`"


@cache
def _modules() -> dict[str, set[str]]:
    """Every clusterctl module by its path under clusterctl/, and the names defined at its top level (a
    package face's imports count: that is where the others import them from)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        names: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif path.name == "__init__.py" and isinstance(node, ast.Import | ast.ImportFrom):
                names |= {alias.asname or alias.name for alias in node.names}
        found[path.relative_to(PACKAGE).as_posix()] = names
    return found


def _resolve(cited: str, package: str = "") -> list[str]:
    """The modules a citation can mean: ``package/cited`` in a package's row, else every module whose path
    ends with ``cited`` (the docs shorten ``run/slurm/script.py`` to ``slurm/script.py``)."""
    modules = _modules()
    if package and f"{package}/{cited}" in modules:
        return [f"{package}/{cited}"]
    matching = [m for m in modules if m == cited or m.endswith(f"/{cited}")]
    return [m for m in matching if m.startswith(f"{package}/")] or matching


def _citations() -> list[tuple[str, int, str, str, list[str]]]:
    """(doc, line, package of the table row or "", module cited, names cited with it)."""
    found = []
    for doc in DOCS:
        for number, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
            row = re.match(r"\| `([a-z_]+)/` \|", line)
            package = row.group(1) if row and (PACKAGE / row.group(1)).is_dir() else ""
            for match in re.finditer(MODULE, line):
                after = line[match.end() :]
                names = re.findall(NAME, m.group(0)) if (m := re.match(rf"(?: {NAME})+", after)) else []
                before = re.search(rf"{NAME} \($", line[: match.start()])
                # ``check`` (`rules_node.py`) names a command; a code name has a capital or an underscore.
                names += [before.group(1)] if before and re.search(r"[A-Z_]", before.group(1)) else []
                found.append((doc, number, package, match.group(1), names))
    return found


def test_the_citations_are_read() -> None:
    """Both forms of a cited name are read, and a table row's modules are read in its package."""
    citations = {(doc, package, module, tuple(names)) for doc, _, package, module, names in _citations()}
    assert ("docs/STYLE-NOTES.md", "", "hosts/command.py", ("CommandResult",)) in citations
    assert ("docs/DESIGN.md", "hosts", "command.py", ()) in citations
    assert _resolve("slurm/script.py") == ["run/slurm/script.py"]


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_the_docs_cite_exists(doc: str) -> None:
    missing = []
    for cited_in, number, package, module, _ in _citations():
        if cited_in != doc:
            continue
        if module.startswith(("tests/", "bench/", "scripts/")):
            if not (ROOT / module).is_file():
                missing.append(f"{doc}:{number}: {module}")
        elif (package or "/" in module) and not _resolve(module, package):
            missing.append(f"{doc}:{number}: {package + '/' if package else ''}{module}")
    assert not missing, "modules cited that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS)
def test_a_name_cited_with_its_module_is_defined_there(doc: str) -> None:
    wrong = []
    for cited_in, number, package, module, names in _citations():
        if cited_in != doc or not names or module.startswith(("tests/", "bench/", "scripts/")):
            continue
        candidates = _resolve(module, package)
        if len(candidates) != 1:
            continue
        defined = _modules()[candidates[0]]
        wrong += [f"{doc}:{number}: `{name}` is not defined in {candidates[0]}" for name in names
                  if name not in defined]  # fmt: skip
    assert not wrong, "names cited with a module that does not define them:\n" + "\n".join(wrong)
