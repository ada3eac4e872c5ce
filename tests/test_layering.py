"""The package layout's arrows, checked over the source (docs/DESIGN.md, "Layers"): no import circle
between clusterctl's modules, no import from a lower layer into a higher one, only the shared leaves at
the top level, and the pure planning halves free of every connector.

Imports inside ``if TYPE_CHECKING:`` never execute, but they count: a type-only import that points up
or closes a circle couples the modules as much as a run-time one (issue 39). A type a lower layer needs
lives down there (the workloads' ``Job``, not the run stage's plan).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "clusterctl"

# Lowest first. A module may import its own unit and any unit on a lower layer.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "",
            "errors",
            "paths",
            "readfile",
            "yamlio",
            "templating",
            "versions",
            "findings",
            "interrupts",
            "nodesets",
            "terminal",
        }
    ),
    frozenset({"inventory"}),
    frozenset({"hosts"}),
    frozenset({"diagnostics", "image", "data"}),
    frozenset({"provision", "containers"}),
    frozenset({"workloads"}),
    frozenset({"results"}),
    frozenset({"run", "explain"}),
    frozenset({"check"}),
    frozenset({"sandbox"}),
    frozenset({"accept"}),
    frozenset({"cli", "__main__"}),
)
TOP_LEVEL_MODULES = frozenset({"__init__", "__main__"}) | (LAYERS[0] - {""})
PAYLOAD = "payload"  # runs inside the benchmark container and imports no clusterctl module
PURE = ("run.plan", "run.sweep", "run.preflight", "run.launchers.mpirun", "run.launchers.srun", "workloads.job",
        "workloads.build", "run.launchers.mpirun_allocation", "diagnostics.counter_probe", "containers.plan", "provision.playbook", "run.slurm.script",
        "run.slurm.jobs", "diagnostics.pairs", "diagnostics.active", "explain.rules", "explain.verdict",
        "explain.explanation", "data.synth", "data.probe", "data.tfrecord", "data.switch", "accept.plan", "accept.criteria",
        "accept.verdict", "check.drain", "check.healthcheck")  # fmt: skip
# What talks to another machine or process: a pure plan never loads one, directly or through a module.
CONNECTORS = ("fabric", "paramiko", "docker", "subprocess", "requests", "urllib3")
# The docker SDK's value classes (a mount, a device request): a plan builds them and contacts nothing.
VALUES_ONLY = ("docker.types",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> tuple[set[str], set[str]]:
    """(runtime imports, type-only imports), as absolute dotted names, of one module."""
    runtime: set[str] = set()
    type_only: set[str] = set()

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                visit(statement, True)
            for statement in node.orelse:
                visit(statement, typing_only)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(["clusterctl", *anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        (type_only if typing_only else runtime).update(names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return runtime, type_only


class Imports(NamedTuple):
    """What one module imports: clusterctl modules at run time and under TYPE_CHECKING, and the
    dotted names of everything else it imports at run time (``fabric``, ``docker.types``, ...)."""

    runtime: set[str]
    type_only: set[str]
    external: set[str]


@cache
def _graph() -> dict[str, Imports]:
    """Every clusterctl module (payload excluded) and what it imports."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py") if PAYLOAD not in p.relative_to(PACKAGE).parts}

    def resolve(name: str) -> str | None:
        if name != "clusterctl" and not name.startswith("clusterctl."):
            return None
        name = name.removeprefix("clusterctl").removeprefix(".")
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in paths.items():
        runtime, type_only = _imports(ast.parse(path.read_text()), module, path.name == "__init__.py")
        graph[module] = Imports(
            {r for n in runtime if (r := resolve(n)) is not None and r != module},
            {r for n in type_only if (r := resolve(n)) is not None and r != module},
            {n for n in runtime if n and resolve(n) is None},
        )
    return graph


def _layer(module: str) -> int:
    unit = module.split(".")[0]
    return next(i for i, units in enumerate(LAYERS) if unit in units)


def test_every_top_level_unit_has_a_layer() -> None:
    units = {m.split(".")[0] for m in _graph()}
    assert units <= set().union(*LAYERS), units - set().union(*LAYERS)


def test_the_top_level_holds_only_the_package_face_and_the_shared_leaves() -> None:
    loose = {p.stem for p in PACKAGE.glob("*.py")} - TOP_LEVEL_MODULES
    assert not loose, f"modules at the top level of clusterctl/ that belong in a package: {sorted(loose)}"


def test_no_import_points_up_a_layer() -> None:
    upward = []
    for module, (runtime, type_only, _) in _graph().items():
        for target in runtime:
            if _layer(target) > _layer(module):
                upward.append(f"{module} -> {target}")
        for target in type_only:
            if _layer(target) > _layer(module):
                upward.append(f"{module} -> {target} (type-only)")
    assert not upward, "imports that run back up the layers:\n" + "\n".join(sorted(upward))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle of ``graph`` found by a depth-first walk, as the path that closes it."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                walk(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)
    return cycles


def test_no_import_circle_between_modules_type_only_imports_included() -> None:
    graph = {m: imports.runtime | imports.type_only for m, imports in _graph().items()}
    cycles = _circles(graph)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_circle_walk_sees_a_type_only_circle() -> None:
    """The walk itself: a type-only import read as one, and the circle it closes found."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from clusterctl.diagnostics.rules import X\n"
    runtime, type_only = _imports(ast.parse(source), "diagnostics.rules_host", False)
    assert "clusterctl.diagnostics.rules.X" in type_only and not runtime - {"typing.TYPE_CHECKING", "typing"}
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("module", PURE)
def test_a_pure_plan_reaches_no_connector(module: str) -> None:
    """Following run-time imports, a planning half never loads SSH, the docker SDK, HTTP or a subprocess."""
    graph = _graph()
    assert module in graph, f"{module} is not a module any more: update PURE"
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(graph[current].runtime)
    reached = sorted(
        f"{m} imports {name}"
        for m in seen
        for name in graph[m].external
        if name.startswith(CONNECTORS) and not name.startswith(VALUES_ONLY)
    )
    assert not reached, f"{module} reaches a connector:\n" + "\n".join(reached)


def test_the_check_sees_an_upward_arrow_and_a_connector() -> None:
    """The walk itself: the CLI imports stages (an arrow this test would refuse the other way), and
    the SSH connector imports fabric."""
    graph = _graph()
    assert any(target.startswith("run") for target in graph["cli.run"].runtime | graph["cli.run"].type_only)
    assert _layer("cli.run") > _layer("run.plan")
    assert (
        "fabric" in graph["hosts.ssh"].external and "docker.types.Mount" in graph["containers.plan"].external
    )


# Where a launcher's (backend's) name may be compared with a string: the registry that resolves
# `--launcher`, and the reports, which show the name a run's record holds (data, not a branch on how to run).
NAME_READERS = ("run.context", "results.report", "results.report_table", "results.plot")
LAUNCHER_NAMES = {"ssh", "slurm", "mpirun", "srun"}


def _compares_a_name(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    named = any(isinstance(o, ast.Constant) and o.value in LAUNCHER_NAMES for o in operands)
    launcherish = any(
        (isinstance(o, ast.Name) and "launcher" in o.id)
        or (isinstance(o, ast.Attribute) and (o.attr == "name" or "launcher" in o.attr))
        for o in operands
    )
    return named and launcherish


def test_no_code_outside_a_backend_compares_a_launchers_name() -> None:
    """How a job is started and run is the launcher's and the backend's to say: nothing else branches on
    which one it is (``if launcher.name == "ssh"``)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py") if PAYLOAD not in p.relative_to(PACKAGE).parts}
    found = sorted(
        f"{module}:{node.lineno}"
        for module, path in paths.items()
        if not module.startswith(("run.backends", *NAME_READERS))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Compare) and _compares_a_name(node)
    )
    assert not found, "comparisons with a launcher's name outside the backends:\n" + "\n".join(found)


def test_the_results_stage_reaches_no_connector() -> None:
    """``results/`` judges and reports what was collected; reading the nodes (SSH) is the backends' and
    the diagnostics' (``diagnostics.counter_reading``)."""
    graph = _graph()
    reached = sorted(
        f"{module} -> {target}"
        for module, imports in graph.items()
        if module.startswith("results")
        for target in imports.runtime | imports.type_only
        if target.startswith("hosts")
    )
    assert not reached, "results/ modules that import a connector:\n" + "\n".join(reached)


# The tests follow the same house: what tests share is in tests/helpers/ (builders, the sandbox's class)
# or tests/fixtures/ (captured data), and fixtures in conftest.py files, which pytest loads itself.
TESTS = Path(__file__).resolve().parent


def _imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) and conftest modules that ``source`` imports, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        else:
            continue
        found += [
            name
            for name in names
            if any(part.startswith("test_") or part == "conftest" for part in name.split("."))
        ]
    return sorted(set(found))


def test_no_test_file_imports_a_test_module_or_a_conftest() -> None:
    """A test module's names are its own: a builder two test files need lives in tests/helpers/."""
    found = [
        f"{path.relative_to(TESTS.parent)}: imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _imported_test_modules(path.read_text())
    ]
    assert not found, (
        "test files that import a test module or a conftest (move what they share to tests/helpers/):\n"
        + "\n".join(found)
    )


def test_the_test_import_check_sees_each_form() -> None:
    source = (
        "from tests.test_report import record\nimport tests.integration.conftest\n"
        "from tests import test_render\nfrom tests.helpers.records import record\n"
    )
    assert _imported_test_modules(source) == [
        "tests.integration.conftest",
        "tests.test_render",
        "tests.test_report",
        "tests.test_report.record",
    ]
