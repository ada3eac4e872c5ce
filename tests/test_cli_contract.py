"""The CLI's contract, through the installed entry point, for every command of the tree.

Each case runs the ``clusterctl`` console script next to this interpreter in its own process, so what
is tested is what a user runs: the script, typer, whichever click typer uses, and ``clusterctl.cli.main``.
The command tree is walked from the Typer app, so a new command is covered without listing it here.

- ``--help`` exits 0 and prints the usage line;
- a missing argument, a value of the wrong type, an unknown option and an unknown command exit 2 with
  click's usage message on stderr, and none of them writes a crash log (they are not bugs).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from clusterctl.cli import app

CLUSTERCTL = Path(sys.executable).with_name("clusterctl")


def _walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, click command) for the root and every group and command under it."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


TREE = list(_walk(typer.main.get_command(app)))
GROUPS = [path for path, command in TREE if hasattr(command, "commands")]
LEAVES = [(path, command) for path, command in TREE if not hasattr(command, "commands")]


def _numeric_option(command: Any) -> str | None:
    """The first option of ``command`` whose declared type is int or float, or None."""
    hints = typing.get_type_hints(inspect.unwrap(command.callback))
    for param in command.params:
        if param.param_type_name != "option":
            continue
        kinds = set(typing.get_args(hints.get(param.name))) or {hints.get(param.name)}
        if kinds & {int, float}:
            return param.opts[0]
    return None


def _name(path: tuple[str, ...]) -> str:
    return " ".join(path) or "(root)"


def _clusterctl(args: list[str], state_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed script with a private state directory (where a crash log would land).

    PYTHONPATH passes through, so the contract can be checked against another typer laid over the venv.
    """
    env = {"PATH": "/usr/bin:/bin", "CLUSTERCTL_STATE_DIR": str(state_dir), "COLUMNS": "100"}
    env |= {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return subprocess.run([str(CLUSTERCTL), *args], capture_output=True, text=True, env=env, timeout=60)


def _assert_usage_error(
    result: subprocess.CompletedProcess[str], state_dir: Path, path: tuple[str, ...]
) -> None:
    """Exit 2, click's usage message naming the command, no internal error, no crash log."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"Usage: {' '.join(('clusterctl', *path))} "), result.stderr
    assert "Error:" in result.stderr
    assert "internal error" not in result.stderr
    logs = state_dir / "logs"
    assert not logs.exists() or not any(logs.iterdir()), list(logs.iterdir())


def test_the_tree_has_every_noun() -> None:
    """The walk sees nested groups, so the cases below cover the whole tree, not only the top."""
    names = {_name(path) for path, _ in TREE}
    assert {"inventory validate", "check topology", "sandbox up", "run", "sweep"} <= names


@pytest.mark.parametrize("path", [path for path, _ in TREE], ids=_name)
def test_help_exits_0(path: tuple[str, ...], tmp_path: Path) -> None:
    result = _clusterctl([*path, "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout and " ".join(("clusterctl", *path)) in result.stdout


@pytest.mark.parametrize("path", [path for path, _ in TREE], ids=_name)
def test_unknown_option_exits_2(path: tuple[str, ...], tmp_path: Path) -> None:
    result = _clusterctl([*path, "--no-such-option"], tmp_path)
    _assert_usage_error(result, tmp_path, path)
    assert "--no-such-option" in result.stderr


@pytest.mark.parametrize("path", GROUPS, ids=_name)
def test_unknown_command_exits_2(path: tuple[str, ...], tmp_path: Path) -> None:
    result = _clusterctl([*path, "no-such-command"], tmp_path)
    _assert_usage_error(result, tmp_path, path)
    assert "No such command 'no-such-command'" in result.stderr


@pytest.mark.parametrize(
    "path", [path for path, command in LEAVES if any(p.required for p in command.params)], ids=_name
)
def test_missing_argument_exits_2(path: tuple[str, ...], tmp_path: Path) -> None:
    result = _clusterctl(list(path), tmp_path)
    _assert_usage_error(result, tmp_path, path)
    assert "Missing" in result.stderr


@pytest.mark.parametrize(
    ("path", "option"),
    [(path, option) for path, command in LEAVES if (option := _numeric_option(command))],
    ids=lambda case: _name(case) if isinstance(case, tuple) else case,
)
def test_bad_value_exits_2(path: tuple[str, ...], option: str, tmp_path: Path) -> None:
    result = _clusterctl([*path, option, "not-a-number"], tmp_path)
    _assert_usage_error(result, tmp_path, path)
    assert f"Invalid value for '{option}'" in result.stderr


def test_every_command_ends_by_returning_its_exit_code() -> None:
    """One convention for every command: it returns 0 or 1; bad input is raised (exit 2), never both."""
    hints = {_name(path): typing.get_type_hints(inspect.unwrap(command.callback)) for path, command in LEAVES}
    assert [name for name, h in hints.items() if h.get("return") is not int] == []


def test_bad_value_cases_cover_the_commands_that_take_numbers() -> None:
    """Guard against the type lookup silently finding nothing (e.g. after a typer upgrade)."""
    covered = {_name(path) for path, command in LEAVES if _numeric_option(command)}
    assert {"run", "sweep", "sandbox up", "check topology", "inspect"} <= covered
