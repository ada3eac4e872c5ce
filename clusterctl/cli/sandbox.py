"""`clusterctl sandbox`: a local cluster of node containers (sshd + Docker engine each), like kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import console, err_console, print_json
from clusterctl.sandbox.plan import DEFAULT_NAME, DEFAULT_SUBNET
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from clusterctl.sandbox.cluster import SandboxStatus

app = typer.Typer(
    help="A local cluster of node containers on this machine's Docker engine: the default target.",
    no_args_is_help=True,
)


def _progress(message: str) -> None:
    err_console.print(f"[dim]sandbox:[/] {message}", highlight=False)


def _show(result: SandboxStatus, *, verbose: bool = False) -> None:
    """The sandbox's state and how many nodes are ok first, then a verdict line per set of nodes in the
    same state, folded (``node[1-128]  ok    running, sshd answering``); ``verbose``: the table of every
    node (container, address, CPUs); then the warnings and where its files are."""
    if result.state == "down":
        console.print("sandbox: down (none recorded here). Start one with `clusterctl sandbox up --nodes 2`.")
        return
    from collections import Counter

    from rich.text import Text

    from clusterctl.cli.verdicts import print_folded, verdict_counts

    said: dict[str, tuple[str, str | Text]] = {
        n.name: ("ok" if n.state == "running" and n.sshd else "FAIL",
                 f"{n.state}, sshd {'answering' if n.sshd else 'not answering'}")
        for n in result.nodes
    }  # fmt: skip
    tally = verdict_counts(Counter(word for word, _ in said.values()), ("FAIL", "ok"))
    console.print(Text(safe_text(f"sandbox {result.name}: {result.state}; {tally}")), highlight=False)
    if verbose:
        from rich.table import Table

        table = Table()
        for column in ("node", "container", "address", "cpus", "container state", "sshd"):
            table.add_column(column, overflow="fold")
        for n in result.nodes:
            table.add_row(n.name, n.container, n.address, n.cpus or "all", n.state, "yes" if n.sshd else "no")
        console.print(table)
    else:
        print_folded(console, said)
    from clusterctl.cli.verdicts import print_summary

    if result.shared_cpus:
        print_summary(console, "warning: nodes share CPUs: a multi-node run's throughput measures contention "
                      "between them, not scaling (give the sandbox at most one node per CPU).")  # fmt: skip
    f = result.files
    print_summary(
        console,
        f"network {result.network} ({result.subnet}), node image {result.node_image}, "
        f"{result.isolation or 'unknown'} mode"
        + (", light nodes: sshd only, no Docker engine inside" if result.light else "")
        + (
            ", Slurm: slurmctld on node1, slurmd on every node (run --launcher slurm)" if result.slurm else ""
        ),
    )
    console.print(
        f"inventory:     {f.inventory}\n               (the default for every command while the sandbox is up)\n"
        f"identity:      {f.private_key}\nknown_hosts:   {f.known_hosts}",
        highlight=False,
        markup=False,
    )


@app.command()
def up(
    nodes: int = typer.Option(2, "--nodes", "-n", help="Number of node containers."),
    name: str = typer.Option(DEFAULT_NAME, "--name", help="Sandbox name (prefix of its Docker objects)."),
    subnet: str | None = typer.Option(
        None, "--subnet", help=f"Bridge network subnet. Default: the existing one, else {DEFAULT_SUBNET}."
    ),
    slurm: bool = typer.Option(
        False,
        "--slurm",
        help="Also run Slurm: munge, slurmctld on node1, configless slurmd on every node; the inventory gets a "
        "slurm block (run --launcher slurm).",
    ),
    light: bool = typer.Option(
        False,
        "--light",
        help="Light nodes: sshd (and with --slurm slurmd), no Docker engine inside, so 32-240 fit on a laptop; "
        "a scale bed for the read-only checks, provision and Slurm with runtime none (no benchmark containers).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the resulting status as JSON."),
) -> int:
    """Create or reconcile the sandbox: N nodes, a key pair, known_hosts, and a generated inventory.

    Run again with the same count it changes nothing; with another count it adds or removes nodes.
    """
    from clusterctl.sandbox import cluster

    result = cluster.up(name, nodes, subnet, log=_progress, slurm=slurm, light=light)
    if as_json:
        print_json(result.to_json())
        return 0
    summary = "; ".join(result.changes) if result.changes else "no change"
    console.print(f"sandbox {result.name} is {result.state} ({summary})", highlight=False)
    _show(result)
    return 0


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="The table of every node (container, address, CPUs), none folded."
    ),
) -> int:
    """Show the sandbox's nodes and where its inventory, key and known_hosts are. Exit 1 when degraded."""
    from clusterctl.sandbox import cluster

    result = cluster.status()
    if as_json:
        print_json(result.to_json())
    else:
        _show(result, verbose=verbose)
    return 1 if result.state == "degraded" else 0


@app.command()
def down(
    name: str | None = typer.Option(
        None, "--name", help="Sandbox to remove. Default: the one recorded here."
    ),
) -> int:
    """Remove the sandbox's containers, network, volumes and files. Safe to run again."""
    from clusterctl.sandbox import cluster

    removed = cluster.down(name)
    if removed:
        console.print("sandbox removed: " + ", ".join(removed), highlight=False)
    else:
        console.print("sandbox: nothing to remove")
    return 0
