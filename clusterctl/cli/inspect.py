"""`clusterctl inspect FILE...`: read saved diagnostic outputs, explain what is wrong and what it costs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import console, markup_safe, print_json
from clusterctl.errors import InputError

if TYPE_CHECKING:
    from clusterctl.diagnostics.inspect import Inspection

_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def inspect(
    files: list[Path] = typer.Argument(..., help="Saved outputs (nvidia-smi topo -m, ibstat, logs, ...)."),
    kind: str | None = typer.Option(
        None,
        "--kind",
        help="Skip detection: the kind of every FILE (a name it does not know lists the kinds).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array, one object per file."),
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
        print_json([result.model_dump(exclude={"findings": {"__all__": {"node"}}}) for result in results])
    else:
        for result in results:
            _show(result)
    return exit_code([f for result in results for f in result.findings], strict=strict)


def _show(result: Inspection) -> None:
    also = f" (also judged as {', '.join(result.also_read_as)})" if result.also_read_as else ""
    console.print(f"[bold]{markup_safe(result.file)}[/]  kind: {result.kind or 'unknown'}{also}  "
                  f"unparsed lines: {len(result.unparsed_lines)}")  # fmt: skip
    if not result.findings:
        console.print("  no findings")
        return
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    for column in ("severity", "code", "message", "advice"):
        table.add_column(column, overflow="fold")
    for finding in result.findings:
        style = _STYLE[finding.severity]
        table.add_row(
            f"[{style}]{finding.severity}[/]",
            *map(markup_safe, (finding.code, finding.message, finding.advice)),
        )
    console.print(table)
