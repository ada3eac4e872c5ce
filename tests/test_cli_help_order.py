"""``clusterctl --help`` lists the commands in the order of the workflow, in panels by stage (issue 24 item 5).

The help is read as a user sees it: the module run in its own process, rich's panels parsed from the
text. A new top-level command fails the first test until it is given a place in ``HELP_PANELS``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import typer.main

from clusterctl.cli import HELP_PANELS, WORKFLOW_ORDER, app

EXPECTED_ORDER = [
    "sandbox",
    "inventory",
    "provision",
    "image",
    "up",
    "status",
    "down",
    "data",
    "run",
    "report",
    "explain",
    "sweep",
    "check",
    "baseline",
    "inspect",
    "collect",
    "accept",
    "render",
]
EXPECTED_PANELS = ["Try it on this machine", "Set up the cluster", "Benchmark", "Diagnose", "Tools"]

PANEL_TOP = re.compile(r"^╭─ (?P<title>.+?) ─+╮$")
COMMAND_LINE = re.compile(r"^│ (?P<name>[a-z][a-z0-9-]*)\s{2,}\S")


def _help_text() -> str:
    env = {**os.environ, "COLUMNS": "100", "PYTHONIOENCODING": "utf-8", "LANG": "C.UTF-8"}
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-m", "clusterctl", "--help"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _panels(text: str) -> list[tuple[str, list[str]]]:
    """(panel title, command names in the order shown) for each panel of the help, top to bottom."""
    panels: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        line = line.rstrip()
        top = PANEL_TOP.match(line)
        if top:
            panels.append((top["title"], []))
            continue
        command = COMMAND_LINE.match(line)
        if command and panels and not command["name"].startswith("-"):
            panels[-1][1].append(command["name"])
    return [(title, names) for title, names in panels if title != "Options"]


def test_every_top_level_command_has_a_place_in_the_workflow() -> None:
    registered = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert registered == set(WORKFLOW_ORDER), (
        "a top-level command without a panel (or a panel entry without a command): "
        f"missing {sorted(registered - set(WORKFLOW_ORDER))}, extra {sorted(set(WORKFLOW_ORDER) - registered)}"
    )
    assert list(WORKFLOW_ORDER) == EXPECTED_ORDER
    assert list(HELP_PANELS) == EXPECTED_PANELS


def test_help_lists_the_commands_in_workflow_order_and_panels() -> None:
    panels = _panels(_help_text())
    assert [title for title, _ in panels] == EXPECTED_PANELS
    assert [name for _, names in panels for name in names] == EXPECTED_ORDER
    assert dict(panels) == {title: list(names) for title, names in HELP_PANELS.items()}


def test_the_command_tree_lists_in_workflow_order_without_rich() -> None:
    """click's own listing (shell completion, plain help) follows the same order."""
    root = typer.main.get_command(app)
    ctx = root.make_context("clusterctl", ["--help"], resilient_parsing=True)
    assert root.list_commands(ctx) == EXPECTED_ORDER  # type: ignore[attr-defined]
