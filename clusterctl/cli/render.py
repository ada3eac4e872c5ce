"""`clusterctl render`: write generated files without building or running anything."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.common import InventoryOption, console, load

app = typer.Typer(help="Render generated files.", no_args_is_help=True)


@app.command()
def dockerfile(
    inventory: Path | None = InventoryOption,
    out: Path = typer.Option(Path("build/image"), "--out", "-o", help="Directory for the build context."),
) -> int:
    """Write the benchmark image's Dockerfile and build context for the inventory's profile."""
    from clusterctl.image.render import write_context

    inv = load(inventory)
    ctx = write_context(inv, out)
    console.print(
        f"wrote {ctx.dockerfile} (profile {inv.image.profile}, base {inv.image.from_image}, "
        f"context hash {ctx.content_hash[:12]})",
        highlight=False,
    )
    return 0
