"""The command line: Typer apps split by noun, and the one place errors become exit codes.

Exit codes: 0 success; 1 a check failed or a run failed; 2 bad input or environment (nothing was run
on any host); 130 interrupted. No user error prints a traceback. An unexpected exception (a bug) prints
one line naming a crash log that holds the traceback; ``CLUSTERCTL_DEBUG=1`` raises it instead.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.core
import typer.main
import typer.models

from clusterctl import __version__
from clusterctl.cli import accept as accept_cli
from clusterctl.cli import baseline as baseline_cli
from clusterctl.cli import check as check_cli
from clusterctl.cli import data as data_cli
from clusterctl.cli import explain as explain_cli
from clusterctl.cli import image as image_cli
from clusterctl.cli import inventory as inventory_cli
from clusterctl.cli import lifecycle as lifecycle_cli
from clusterctl.cli import pairs as pairs_cli
from clusterctl.cli import provision as provision_cli
from clusterctl.cli import render as render_cli
from clusterctl.cli import run as run_cli
from clusterctl.cli import sandbox as sandbox_cli
from clusterctl.cli import slurm_hc as slurm_hc_cli
from clusterctl.cli.common import err_console, markup_safe
from clusterctl.cli.inspect import inspect as inspect_command
from clusterctl.errors import ClusterctlError
from clusterctl.paths import state_dir

DEBUG_ENV = "CLUSTERCTL_DEBUG"

# typer >= 0.29 carries its own copy of click (``typer._click``) and raises that copy's exceptions; older
# typer raises the click package's. Catching ``click.ClickException`` would miss the former, so the
# classes are taken from whichever module defines ``typer.BadParameter``, and ``typer.Abort`` is the
# abort that typer's own main raises in either case.
_click_exceptions = importlib.import_module(typer.BadParameter.__module__)

# ``clusterctl --help`` lists the commands in the order a person uses them, in panels by stage. The
# registrations below stay where they are; this table alone decides the order and the panel, and
# tests/test_cli_help_order.py fails for a top-level command that is missing from it.
HELP_PANELS: dict[str, tuple[str, ...]] = {
    "Try it on this machine": ("sandbox",),
    "Set up the cluster": ("inventory", "provision", "image", "up", "status", "down"),
    "Benchmark": ("data", "run", "report", "explain", "sweep"),
    "Diagnose": ("check", "baseline", "inspect", "collect", "accept"),
    "Tools": ("render",),
}
WORKFLOW_ORDER: tuple[str, ...] = tuple(name for names in HELP_PANELS.values() for name in names)


class _WorkflowGroup(typer.core.TyperGroup):
    """The root group: lists its commands in :data:`WORKFLOW_ORDER` (any other after them, as registered)."""

    def list_commands(self, ctx: Any) -> list[str]:
        rank = {name: i for i, name in enumerate(WORKFLOW_ORDER)}
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: rank.get(name, len(rank)))


app = typer.Typer(
    name="clusterctl",
    cls=_WorkflowGroup,
    help="Turn GPU + InfiniBand hosts described in one inventory into a Horovod/MPI benchmark cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(inventory_cli.app, name="inventory")
app.add_typer(image_cli.app, name="image")
lifecycle_cli.register(app)
app.command("inspect")(inspect_command)
check_cli.app.command("pairs")(pairs_cli.pairs)
check_cli.app.command("slurm-hc")(slurm_hc_cli.slurm_hc)
app.add_typer(check_cli.app, name="check")
app.add_typer(data_cli.app, name="data")
app.add_typer(baseline_cli.app, name="baseline")
app.command("collect")(check_cli.collect_command)
app.command("provision")(provision_cli.command)
app.add_typer(render_cli.app, name="render")
app.add_typer(sandbox_cli.app, name="sandbox")
app.command("run", cls=run_cli.RunCommand)(run_cli.run)
app.command("report")(run_cli.report)
app.command("explain")(explain_cli.explain)
app.command("sweep")(run_cli.sweep)
app.command("accept")(accept_cli.accept)


def _place_in_panels(typer_app: typer.Typer) -> None:
    """Give every registered command and group its panel of :data:`HELP_PANELS`."""
    panel_of = {name: panel for panel, names in HELP_PANELS.items() for name in names}
    infos: list[typer.models.CommandInfo | typer.models.TyperInfo] = [
        *typer_app.registered_commands,
        *typer_app.registered_groups,
    ]
    for info in infos:
        name = info.name or (info.callback.__name__ if info.callback else None)
        if name in panel_of:
            info.rich_help_panel = panel_of[name]


_place_in_panels(app)


def _show_version(value: bool) -> None:
    if value:
        print(f"clusterctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """clusterctl: provision, start, run and report a containerised MPI benchmark cluster."""


def write_crash_log(exc: BaseException, argv: list[str]) -> Path:
    """Write ``exc``'s traceback and the command line to a new file under ``<state dir>/logs/``."""
    import traceback  # imported on use, like everything a healthy start does not need
    from datetime import UTC, datetime

    logs = state_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"crash-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}.log"
    text = "".join(traceback.format_exception(exc))
    path.write_text(f"clusterctl {__version__}\nargv: {argv!r}\n\n{text}")
    return path


@functools.cache
def _command() -> Callable[..., Any]:
    """``app``'s click command tree, built once per process: Typer reads every command's signature and
    type hints to build it, which took about 55 ms of a 60 ms ``inventory validate``, on every call of
    ``main`` (the tests and benches call it thousands of times in one process). Commands are registered
    at import, before the first call; click makes a fresh context per invocation."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: the process arguments) and return the exit code."""
    try:
        os.getcwd()
    except FileNotFoundError:  # every relative path (inventory, -o, runs) would resolve against nothing
        err_console.print(
            "[bold red]error:[/] the current directory no longer exists (it was deleted or unmounted). "
            "Fix: cd to an existing directory and run the command again.",
            highlight=False,
            soft_wrap=True,
        )
        return 2
    try:
        result = _command()(args=argv, standalone_mode=False, prog_name="clusterctl")
    except ClusterctlError as exc:
        err_console.print(f"[bold red]error:[/] {markup_safe(str(exc))}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except typer.Abort:
        err_console.print("aborted")
        return 130
    except _click_exceptions.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, _click_exceptions.UsageError) else exc.exit_code
    except Exception as exc:  # a bug: one line for the user, the traceback in a file
        if os.environ.get(DEBUG_ENV):
            raise
        args = list(argv) if argv is not None else sys.argv[1:]
        try:
            where = f"the traceback is in {write_crash_log(exc, args)}"
        except (OSError, ClusterctlError) as log_error:  # no state directory: the handler must not crash
            where = f"no crash log could be written ({log_error}); rerun with {DEBUG_ENV}=1 to see it"
        err_console.print(
            f"[bold red]internal error:[/] {type(exc).__name__}: {markup_safe(str(exc))}. This is a clusterctl bug: {markup_safe(where)}; "
            "please attach it to a bug report.",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return result if isinstance(result, int) else 0


def entry() -> NoReturn:
    """The console script: run :func:`main` on the process arguments and exit with its code.

    Before the interpreter shuts down, every object is moved to the collector's permanent generation
    (``gc.freeze``): the shutdown's collection then skips the start-up's long-lived objects (the
    pydantic models, the command tree), which cost about a tenth of a short command's time
    (``bench/cli_latency.py``). ``main`` itself stays free of it, for callers that go on running.
    """
    code = main()
    gc.freeze()
    sys.exit(code)
