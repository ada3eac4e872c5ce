"""`clusterctl image build` and `clusterctl image push`: build once, deliver to every node."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import InventoryOption, console, err_console, load
from clusterctl.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

    from clusterctl.inventory import Inventory

app = typer.Typer(help="Build the benchmark image and deliver it to every node.", no_args_is_help=True)

# Build output carries terminal colour codes (pip's warnings); they would garble the live display.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Build output lines shown under the spinner while a build runs.
_SHOWN_LINES = 8


@app.command()
def build(
    inventory: Path | None = InventoryOption,
    builder: str | None = typer.Option(
        None, "--builder", help="Node to build on (its engine, over SSH). Default: the local engine."
    ),
) -> None:
    """Render the Dockerfile and build it once; the tag carries the build context's content hash."""
    from rich.live import Live
    from rich.table import Table

    from clusterctl.image.build import build_image, record_path

    inv = load(inventory)
    names = [node.name for node in inv.nodes]
    if builder is not None and builder not in names:
        raise InputError(
            f"--builder {builder!r}: no node of that name in the inventory. Fix: name one of its nodes "
            f"({', '.join(names)}), or omit --builder to build on the local engine."
        )
    lines: list[str] = []
    start = time.monotonic()

    def view() -> Table:
        table = Table.grid()
        table.add_row(
            f"[bold]building[/] on {builder or 'the local engine'} ({time.monotonic() - start:.0f} s)"
        )
        for line in lines[-_SHOWN_LINES:]:
            table.add_row(f"[dim]{line[: console.width - 2]}[/]")
        return table

    # get_renderable: the elapsed time ticks on while the engine is silent (context upload, quiet steps).
    with Live(console=err_console, refresh_per_second=4, transient=True, get_renderable=view):
        record, built = build_image(
            inv, builder=builder, on_line=lambda line: lines.append(_ANSI.sub("", line))
        )
    took = f"built in {time.monotonic() - start:.0f} s" if built else "already built (same context hash)"
    console.print(
        f"{record.reference} {record.image_id[:19]}: {took}; recorded in {record_path(inv)}", highlight=False
    )


@app.command()
def push(inventory: Path | None = InventoryOption) -> None:
    """Deliver the built image to every node in parallel; skip nodes that hold the same image ID."""
    if not deliver_with_progress(load(inventory)):
        raise typer.Exit(1)


def deliver_with_progress(inv: Inventory) -> bool:
    """Deliver the built image with a live per-node progress display and a result table; True if all ok."""
    from rich.progress import (
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )
    from rich.table import Table

    from clusterctl.image.distribute import distribute

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    tasks = {node.name: progress.add_task(node.name, total=None) for node in inv.nodes}
    with progress:
        image_id, results = distribute(inv, on_bytes=lambda node, n: progress.advance(tasks[node], n))
    table = Table("node", "result", "bytes", "seconds", "detail", title=f"image {image_id[:19]}")
    for name, r in results.items():
        colour = {"skipped": "green", "delivered": "cyan", "failed": "red"}[r.status]
        detail = r.error or (
            "already there" if r.status == "skipped" else f"verified {r.image_id and r.image_id[:19]}"
        )
        table.add_row(name, f"[{colour}]{r.status}[/]", f"{r.bytes_sent:,}", f"{r.duration_s:.1f}", detail)
    console.print(table)
    moved = sum(r.bytes_sent for r in results.values())
    console.print(f"{moved:,} bytes moved" if moved else "nothing moved: every node already holds the image")
    return all(r.ok for r in results.values())
