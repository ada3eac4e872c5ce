"""`clusterctl inspect FILE...`: read saved diagnostic outputs, explain what is wrong and what it costs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import console, markup_safe, print_json
from clusterctl.errors import InputError

if TYPE_CHECKING:
    from clusterctl.diagnostics.inspect import Inspection

# The version of each object of `inspect --json`: it changes when a field changes meaning or goes away.
SCHEMA = "clusterctl.inspect/1"
_WORD_STYLE = {"FAIL": "bold red", "WARN": "yellow", "ok": "green"}


def inspect(
    files: list[Path] = typer.Argument(..., help="Saved outputs (nvidia-smi topo -m, ibstat, logs, ...)."),
    kind: str | None = typer.Option(
        None,
        "--kind",
        help="Skip detection: the kind of every FILE (a name it does not know lists the kinds).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help=f"Print a JSON array, one object per file (each with schema {SCHEMA})."
    ),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    hca: str | None = typer.Option(None, "--hca", help="The HCA that should be up, e.g. mlx5_0."),
    rate: float | None = typer.Option(None, "--expected-rate", help="Expected IB rate in Gb/s."),
    gdr_level: int | None = typer.Option(
        None, "--gdr-level", min=0, max=5, help="NCCL_NET_GDR_LEVEL in use."
    ),
) -> int:
    """Detect each file's kind, parse it, apply the rules and show the findings."""
    # Imported on use: the parsers and rules are not needed to start the CLI.
    from clusterctl.diagnostics import KINDS
    from clusterctl.diagnostics.inspect import inspect_file
    from clusterctl.diagnostics.rules import Expectation
    from clusterctl.findings import exit_code

    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown --kind {kind!r}. Fix: use one of {', '.join(KINDS)}.")
    expect = Expectation(hca=hca, rate_gbps=rate, gdr_level=gdr_level)
    results = [inspect_file(path, kind, expect) for path in files]
    if as_json:
        print_json(
            [
                {"schema": SCHEMA, **result.model_dump(exclude={"findings": {"__all__": {"node"}}})}
                for result in results
            ]
        )
    else:
        for result in results:
            _show(result)
    return exit_code([f for result in results for f in result.findings], strict=strict)


def _show(result: Inspection) -> None:
    """The file's verdict line (kind, unparsed lines, counts), then its findings wrapped under their codes."""
    from clusterctl.cli.verdicts import counted, print_findings, verdict_word

    also = f" (also judged as {', '.join(result.also_read_as)})" if result.also_read_as else ""
    word = verdict_word(result.findings)
    counts = counted(result.findings, ("error", "warning", "info")) or "no findings"
    console.print(f"[bold]{markup_safe(result.file)}[/]  [{_WORD_STYLE[word]}]{word}[/]  kind: "
                  f"{result.kind or 'unknown'}{also}; unparsed lines: {len(result.unparsed_lines)}; {counts}",
                  highlight=False)  # fmt: skip
    print_findings(console, result.findings, nodes=False)
