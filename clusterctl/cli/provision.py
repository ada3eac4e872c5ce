"""`clusterctl provision`: push host setup to every node in parallel and print a per-host recap."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import InventoryOption, console, load, print_json
from clusterctl.cli.image import DeliveryProgress, print_deliveries
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from clusterctl.provision.executor import HostStepResult, ProvisionReport
    from clusterctl.provision.plan import NodePlan

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "would-change": "cyan",
    "failed": "red",
    "skipped": "dim",
    "unreachable": "magenta",
}


class _Live:
    """Prints each host-step outcome as it arrives; an unreachable host once (the recap counts the rest)."""

    def __init__(self) -> None:
        self.unreachable: set[str] = set()

    def __call__(self, result: HostStepResult) -> None:
        if result.status == "unreachable":
            if result.node in self.unreachable:
                return
            self.unreachable.add(result.node)
        reason = f" ({result.reason})" if result.reason and result.status != "ok" else ""
        later = "; no later step runs there" if result.status == "unreachable" else ""
        console.print(
            f"[{_STYLE[result.status]}]{result.status:>12}[/] {result.node}: {result.step}{reason}{later}",
            highlight=False,
        )


def _print_plan(plans: list[NodePlan]) -> None:
    """Each node's steps as a reviewer reads them: skipped with why, or the commands in order."""
    console.print("provision plan (offline: no node was contacted; apply runs only where check fails)")
    for plan in plans:
        console.rule(f"[bold]{plan.node}[/]")
        for rendered in plan.steps:
            if rendered.skip_reason:
                console.print(
                    f"[dim]{rendered.step.name}: skipped ({rendered.skip_reason})[/]", highlight=False
                )
                continue
            console.print(f"[bold]{rendered.step.name}[/]: {rendered.step.description}", highlight=False)
            for source, dest, mode in rendered.uploads:
                console.print(f"  upload  {source} -> {dest} (mode {mode:o})", highlight=False)
            for phase in ("check", "apply", "verify"):
                text = getattr(rendered, phase)
                if phase == "verify" and text == rendered.check:
                    continue
                console.print(f"  {phase}:", highlight=False)
                console.out(textwrap.indent(text.rstrip(), "    "), highlight=False)


def _print_recap(report: ProvisionReport) -> None:
    """The recap: one verdict line per host (FAIL when a step failed or the host was unreachable) with
    its counts, e.g. ``node1  ok    2 ok, 4 changed, 10 skipped``."""
    from rich.text import Text

    from clusterctl.cli.verdicts import verdict_line
    from clusterctl.provision.executor import STATUSES

    title = f"recap: {report.playbook}" + (" (dry run: nothing was changed)" if report.dry_run else "")
    console.print(Text(safe_text(title)), highlight=False)
    counts = report.counts()
    width = max((len(node) for node in counts), default=0)
    for node, c in counts.items():
        tally = Text(", ").join(Text(f"{c[s]} {s}", style=_STYLE[s]) for s in STATUSES if c[s])
        word = "FAIL" if c["failed"] or c["unreachable"] else "ok"
        console.print(verdict_line(node, width, word, tally), highlight=False)


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
    image: bool = typer.Option(
        False,
        "--image",
        help="Also deliver the built benchmark image to the nodes (the image stage; see `image build`).",
    ),
    plan: bool = typer.Option(
        False,
        "--plan",
        help="Print every step's commands per node (check, apply where the check fails, verify) without "
        "connecting to any node, to review before a run.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the recap as JSON."),
) -> int:
    """Set up every node: packages, hostnames, cluster SSH, memlock, Docker (+NVIDIA runtime), MOFED, IPoIB, GPUDirect RDMA.

    Exit 0 when every host is ok/changed/skipped, 1 when a host failed or was unreachable, 2 on bad input.
    """
    from clusterctl.provision.executor import provision_cluster
    from clusterctl.provision.plan import plan_provision

    inv = load(inventory)
    if plan:
        plans = plan_provision(inv, playbook_path=playbook_file, step_names=step, limit=limit)
        if as_json:
            print_json({"plan": [p.to_json() for p in plans]})
        else:
            _print_plan(plans)
        return 0
    with DeliveryProgress() as on_bytes:
        outcome = provision_cluster(
            inv,
            playbook_path=playbook_file,
            step_names=step,
            limit=limit,
            dry_run=dry_run,
            accept_new=accept_new_host_keys,
            deliver_image=image,
            on_result=None if as_json else _Live(),
            on_bytes=on_bytes,
        )
    status_dir = str(outcome.status_dir) if outcome.status_dir else None
    if as_json:
        image_json = None
        if outcome.image_id is not None:
            image_json = {
                "id": outcome.image_id,
                "nodes": {n: asdict(r) for n, r in outcome.deliveries.items()},
            }
        print_json({**outcome.report.to_json(), "status_bundle": status_dir, "image": image_json})
        return 1 if outcome.failed else 0
    _print_recap(outcome.report)
    if status_dir:
        console.print(
            f"status of every host (topo -m, ip addr, ibstat, ibv_devinfo -v, ofed_info -s): {status_dir}"
        )
    if outcome.image_id is not None:
        print_deliveries(outcome.image_id, outcome.deliveries)
    return 1 if outcome.failed else 0
