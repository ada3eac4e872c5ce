"""`clusterctl explain`: why a run was as fast as it was, and what to change."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.common import console, output_file, print_json, writing
from clusterctl.cli.run import JsonOption, RunsDirOption
from clusterctl.errors import InputError

# The version of `explain --json`'s shape: it changes when a field changes meaning or goes away.
SCHEMA = "clusterctl.explain/1"


def explain(
    run: str | None = typer.Argument(
        None,
        metavar="RUN",
        help="A run directory, or a run id under --runs-dir; default: the middle run (by throughput) of "
        "the latest configuration there, the run the report's verdict is about.",
    ),
    latest: bool = typer.Option(
        False,
        "--latest",
        help="With no RUN: explain the latest run instead of its configuration's middle one.",
    ),
    runs_dir: Path = RunsDirOption,
    as_json: bool = JsonOption,
    plot_file: Path | None = typer.Option(
        None, "--plot", help="Also write the phases per node and the telemetry over time (PNG) to FILE."
    ),
) -> int:
    """Verdict, phases per node, POP, MFU and findings with advice for one run."""
    from clusterctl.explain.explanation import explain as explain_facts
    from clusterctl.explain.gather import gather
    from clusterctl.explain.render import print_explanation

    plot_file = output_file(plot_file, "--plot", suffix=".png") if plot_file else None
    if latest and run is not None:
        raise InputError(f"--latest and RUN {run!r} both name a run. Fix: pass one of them.")
    facts, _ = gather(runs_dir, run, latest=latest)
    explanation = explain_facts(facts)
    if plot_file:
        from clusterctl.explain.plot import plot_explanation  # matplotlib: imported only when asked for

        with writing(plot_file, "--plot"):
            plot_explanation(explanation, facts.telemetry, plot_file)
    if as_json:
        print_json({"schema": SCHEMA, **explanation.model_dump(mode="json")})
    else:
        print_explanation(explanation, console)
    return 0
