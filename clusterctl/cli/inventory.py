"""`clusterctl inventory`: validate, show and describe inventory files."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterctl.cli.common import (
    INVENTORY_ENV,
    console,
    load,
    markup_safe,
    print_json,
    resolve_inventory_path,
)

app = typer.Typer(help="Validate and show inventory files.", no_args_is_help=True)

FileArgument = typer.Argument(
    None,
    help=f"Inventory file. Default: ${INVENTORY_ENV}, else the running sandbox's inventory.",
    show_default=False,
)


@app.command()
def validate(file: Path | None = FileArgument) -> int:
    """Check an inventory: exit 0 when valid, 2 with a message naming file, line, field and fix."""
    path = resolve_inventory_path(file)
    inv = load(path)
    console.print(
        f"[green]ok[/]: {markup_safe(str(path))}: cluster {inv.cluster.name}, {len(inv.nodes)} nodes "
        f"(primary {inv.primary.name}), image profile {inv.image.profile}",
        highlight=False,
    )
    return 0


@app.command()
def show(
    file: Path | None = FileArgument,
    as_json: bool = typer.Option(False, "--json", help="Print the validated inventory as JSON."),
) -> int:
    """Print the nodes of an inventory with the values they inherit from the cluster defaults."""
    path = resolve_inventory_path(file)
    inv = load(path)
    if as_json:
        print_json(inv.model_dump(mode="json"))
        return 0
    from rich.table import Table

    table = Table(title=f"cluster {inv.cluster.name} ({markup_safe(str(path))})")
    for column in ("node", "role", "address", "ssh", "GPUs", "ranks", "fabric", "fabric address", "HCA"):
        table.add_column(column)
    for n in inv.nodes:
        table.add_row(
            n.name,
            n.role,
            n.address,
            f"{n.ssh.user}@:{n.ssh.port}",
            f"{n.gpus.count} x {n.gpus.model}" if n.gpus.count else "none",
            str(n.ranks),
            f"{n.fabric.kind} {n.fabric.interface}"
            + (f" {n.fabric.rate_gbps:g} Gb/s" if n.fabric.rate_gbps else ""),
            str(n.fabric.address or "-"),
            ",".join(n.fabric.hca or []) or "-",
        )
    console.print(table)
    c, i = inv.container, inv.image
    console.print(
        f"container: image {c.image or '(built by clusterctl image build)'}, sshd port {c.sshd_port}, "
        f"shm {c.shm_size}, {len(c.mounts)} mounts, privileged {c.privileged}",
        highlight=False,
    )
    versions = ", ".join(f"{k} {v}" for k, v in i.versions.model_dump().items() if v)
    console.print(f"image: profile {i.profile}, base {i.from_image}; {versions}", highlight=False)
    return 0


@app.command()
def schema() -> int:
    """Print the inventory's JSON schema (point your editor's YAML support at it)."""
    from clusterctl.inventory import inventory_schema

    print_json(inventory_schema())
    return 0
