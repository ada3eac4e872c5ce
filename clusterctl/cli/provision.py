"""`clusterctl provision`: push host setup to every node in parallel and print a per-host recap."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from clusterctl.cli.common import InventoryOption, console, load, print_json
from clusterctl.hosts.playbook import load_playbook, select_nodes, select_steps
from clusterctl.hosts.provision import STATUSES, HostStepResult, ProvisionReport, provision
from clusterctl.paths import data_dir

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "would-change": "cyan",
    "failed": "red",
    "skipped": "dim",
    "unreachable": "magenta",
}


def _live(result: HostStepResult) -> None:
    reason = f" ({result.reason})" if result.reason and result.status != "ok" else ""
    console.print(
        f"[{_STYLE[result.status]}]{result.status:>12}[/] {result.node}: {result.step}{reason}",
        highlight=False,
    )


def _recap(report: ProvisionReport) -> Table:
    title = f"recap: {report.playbook}" + (" (dry run: nothing was changed)" if report.dry_run else "")
    table = Table(title=title)
    table.add_column("host")
    for status in STATUSES:
        table.add_column(status, justify="right", style=_STYLE[status])
    for node, counts in report.counts().items():
        table.add_row(node, *(str(counts[s]) for s in STATUSES))
    return table


def command(
    inventory: Path | None = InventoryOption,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Run the read-only probes, report what would change, change nothing."
    ),
    limit: str | None = typer.Option(None, "--limit", help="Only these nodes (comma-separated names)."),
    step: list[str] = typer.Option([], "--step", help="Only this step (repeatable)."),
    accept_new_host_keys: bool = typer.Option(
        False,
        "--accept-new-host-keys",
        help="Record unknown host keys in the cluster's known_hosts (changed keys are always refused).",
    ),
    playbook_file: Path | None = typer.Option(
        None, "--playbook", help="Playbook file (default: the shipped host-setup.yml)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recap as JSON."),
) -> int:
    """Set up every node: packages, hostnames, cluster SSH, memlock, Docker (+NVIDIA runtime), MOFED, IPoIB, GPUDirect RDMA.

    Exit 0 when every host is ok/changed/skipped, 1 when a host failed or was unreachable, 2 on bad input.
    """
    inv = load(inventory)
    playbook = load_playbook(playbook_file or data_dir("playbooks") / "host-setup.yml")
    steps = select_steps(playbook, step)
    nodes = select_nodes(inv, limit)
    report = provision(
        inv,
        playbook,
        steps,
        nodes,
        dry_run=dry_run,
        accept_new=accept_new_host_keys,
        on_result=None if as_json else _live,
    )
    if as_json:
        print_json(report.to_json())
    else:
        console.print(_recap(report))
    return 1 if report.failed else 0
