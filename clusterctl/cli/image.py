"""`clusterctl image build` and `clusterctl image push`: build once, deliver to every node."""

from __future__ import annotations

import re
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import InventoryOption, console, err_console, load, print_json
from clusterctl.errors import InputError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from clusterctl.image.distribute import DeliveryResult


class TransportName(StrEnum):
    """How `image push` delivers (see clusterctl.image.distribute)."""

    registry = "registry"
    stream = "stream"


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
) -> int:
    """Render the Dockerfile and build it once; the tag carries the build context's content hash."""
    from rich.live import Live
    from rich.table import Table

    from clusterctl.image.build import build_image
    from clusterctl.image.record import record_path

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
    return 0


@app.command()
def push(
    inventory: Path | None = InventoryOption,
    transport: TransportName | None = typer.Option(
        None,
        "--transport",
        help="registry: push once to the cluster's TLS registry, nodes pull only the layers they lack; "
        "stream: docker save | docker load over SSH. Default: the inventory's delivery.transport.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print {image_id, summary, nodes: {name: {status, bytes_moved, seconds, error, compression}}}.",
    ),
) -> int:
    """Deliver the built image to every node in parallel; skip nodes that hold the same image ID.

    Exits 1 when any node failed (each failure is listed with its error and the bytes it had moved);
    130 when interrupted (every transfer stopped, the registry stopped, its unfinished uploads removed).
    """
    from rich.text import Text

    from clusterctl.image.distribute import distribute, summary

    inv = load(inventory)
    try:
        with DeliveryProgress() as on_bytes:
            image_id, results = distribute(
                inv,
                transport=transport.value if transport else None,
                on_bytes=on_bytes,
                on_wait=lambda message: err_console.print(Text(message, style="yellow")),
            )
    except KeyboardInterrupt as exc:  # exit 130; the library's message says what was stopped
        err_console.print(Text(str(exc) or "image push interrupted", style="bold red"))
        raise
    if as_json:
        print_json(
            {
                "image_id": image_id,
                "summary": summary(results),
                "nodes": {name: r.to_json() for name, r in results.items()},
            }
        )
    else:
        print_deliveries(image_id, results)
    return 0 if all(r.ok for r in results.values()) else 1


class DeliveryProgress:
    """The ``on_bytes`` callback of image delivery as a live per-node transfer display on stderr.

    Used as a context manager around the library call: the display starts with the first bytes (so
    the stages before delivery print normally) and stops when the block ends.
    """

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> DeliveryProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, node: str, sent: int) -> None:
        """Count ``sent`` more bytes for ``node``."""
        if self._progress is None:
            from rich.progress import (
                DownloadColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self._progress.start()
        if node not in self._tasks:
            self._tasks[node] = self._progress.add_task(node, total=None)
        self._progress.advance(self._tasks[node], sent)


def print_deliveries(image_id: str, results: dict[str, DeliveryResult]) -> None:
    """One verdict line per node (how it got the image: bytes, seconds, compression; or why it failed),
    then the bytes moved."""
    from rich.text import Text

    from clusterctl.cli.verdicts import verdict_line
    from clusterctl.image.distribute import summary

    width = max((len(name) for name in results), default=0)
    for name, r in results.items():
        colour = {"skipped": "green", "delivered": "cyan", "failed": "bold red"}[r.status]
        if r.status == "failed":
            detail = r.error or "failed"
        elif r.status == "skipped":
            detail = "already there"
        else:
            how = f", {r.compression}" if r.compression else ""
            detail = f"{r.bytes_sent:,} bytes in {r.duration_s:.1f} s{how}; verified {short_id(r.image_id)}"
        console.print(verdict_line(name, width, f"{r.status:<9}", detail, style=colour), highlight=False)
    console.print(Text(f"image {short_id(image_id)}: {summary(results)}"), highlight=False)


def short_id(image_id: str | None) -> str:
    """``866bc3f5a844``: an image ID's first 12 hex digits, as docker shows them."""
    return (image_id or "?").removeprefix("sha256:")[:12]
