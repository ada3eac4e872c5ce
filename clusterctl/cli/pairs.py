"""`clusterctl check pairs`: the collective on node pairs (or halves), to name the slow node or link.

Registered on `check`'s app by ``clusterctl.cli``; verdict lines first (one per node), then the slow
links and the groups measured."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    markup_safe,
    print_json,
)
from clusterctl.cli.junit import JunitOption, checked_junit, write_junit
from clusterctl.errors import InputError
from clusterctl.nodesets import fold, grouped

if TYPE_CHECKING:
    from clusterctl.check.pairs import Group, PairsReport

DEFAULT_RUN_TIMEOUT_S = 120.0
_STYLE = {"ok": "green", "slow": "bold red", "fail": "bold red"}


def _named_first(said: tuple[str, str]) -> int:
    """A verdict line's place: the named nodes' lines first."""
    return 1 if said[0] == "ok" else 0


def pairs(
    inventory_path: Path | None = InventoryOption,
    search: str = typer.Option(
        "auto",
        "--search",
        help="all: every pair (n(n-1)/2 groups); halving: compares halves until one node is left "
        "(4 nodes or more; 2 groups a round, at most 2 log2(n) + 3); auto: all up to 8 nodes.",
    ),
    repeats: int = typer.Option(3, "--repeats", min=1, max=10, help="Runs per group; the median is judged."),
    tolerance: float = typer.Option(
        0.5,
        "--tolerance",
        min=0.0,
        max=0.95,
        help="Fraction below the reference still healthy (reference: the baseline of this hardware, "
        "else the median of the node's peers).",
    ),
    timeout: float = typer.Option(
        DEFAULT_RUN_TIMEOUT_S,
        "--timeout",
        min=1,
        callback=finite_seconds,
        help="Seconds each run may take (then it is killed and counts as failed); the whole check takes "
        "at most groups x repeats x this.",
    ),
    runs_dir: Path = typer.Option(
        Path("runs"), "--runs-dir", help="Where the runs' directories and history.sqlite go."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the report as JSON (schema clusterctl.check-pairs/1, see docs/check.md)."
    ),
    junit: Path | None = JunitOption,
    launcher: str | None = typer.Option(
        None,
        "--launcher",
        help="ssh (mpirun in the group's first container: needs `clusterctl up`) or slurm (one job per "
        "run on exactly the group's nodes, --nodelist); default: slurm when the inventory's slurm block "
        "says default: true, else ssh.",
    ),
) -> int:
    """Run the collective (nccl-tests on GPUs, the CPU allreduce otherwise) on node pairs and name the
    slow node: one verdict per node, exit 1 when a node or link is named. Over ssh it needs `clusterctl
    up`; under Slurm each group is a job of its own."""
    from clusterctl.check.pairs import check_pairs, conductor_measure, default_baseline

    if search not in ("auto", "all", "halving"):
        raise InputError(f"--search {search!r}: use auto, all or halving.")
    junit = checked_junit(junit)
    inventory = load(inventory_path)
    if len(inventory.nodes) < 2:
        raise InputError(
            f"check pairs needs at least 2 nodes; inventory {inventory.cluster.name!r} has 1. "
            "Fix: add nodes, or use `clusterctl check health` for one node."
        )

    def progress(group: Group) -> None:
        samples = ", ".join(f"{s:.3g}" for s in group.samples)
        err_console.print(
            markup_safe(f"{'+'.join(group.nodes)}: busbw {samples} GB/s"), highlight=False, soft_wrap=True
        )

    measure = conductor_measure(
        inventory, repeats=repeats, timeout_s=timeout, runs_dir=runs_dir, on_group=progress, launcher=launcher
    )
    report = check_pairs(
        inventory,
        measure,
        search=search,  # type: ignore[arg-type]  # checked above
        repeats=repeats,
        tolerance=tolerance,
        baseline=default_baseline(inventory),
    )
    write_junit(junit, "check pairs", report.junit_cases())
    if as_json:
        print_json(report.to_json())
    else:
        _show(report)
    return 1 if report.named else 0


def _show(report: PairsReport) -> None:
    """Verdict lines, the named nodes first, nodes that say the same folded into one (``node[2-16]``,
    as a halving search's cleared halves do), 80 columns; then the slow links, then the failures."""
    said = {v.node: (v.verdict, v.summary()) for v in report.nodes}
    lines = [(fold(names), verdict, summary) for (verdict, summary), names in grouped(said, _named_first)]
    width = max(len(label) for label, _, _ in lines)
    for label, verdict, summary in lines:
        console.print(
            f"{markup_safe(label.ljust(width))}  [{_STYLE[verdict]}]{verdict.upper():<4}[/]  {markup_safe(summary)}",
            highlight=False,
        )
    for link in report.links:
        console.print(f"[bold red]SLOW LINK[/] {markup_safe(link.summary())}", highlight=False)
    for group in report.groups:
        for failure in group.failures:
            console.print(markup_safe(f"failed run on {'+'.join(group.nodes)}: {failure}"), highlight=False)
    console.print(
        f"{report.search} search, {len(report.groups)} group(s) x {report.repeats} run(s), "
        f"tolerance {report.tolerance:.0%}",
        highlight=False,
        style="dim",
    )
