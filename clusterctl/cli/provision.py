"""`clusterctl provision`: push host setup to every node in parallel; print each change and failure as it
arrives, then the recap: how many nodes ok and failed, then a verdict line per set of nodes with the same
counts, folded (``node[001-128]  ok    6 ok, 10 skipped``)."""

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
    """Prints each host-step outcome that needs a look as it arrives (changed, would change, failed; an
    unreachable host once), and with ``every`` the ok and skipped ones too; the recap counts them all."""

    def __init__(self, every: bool = False) -> None:
        self.unreachable: set[str] = set()
        self.every = every

    def __call__(self, result: HostStepResult) -> None:
        if result.status in ("ok", "skipped") and not self.every:
            return
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


def _print_recap(report: ProvisionReport, *, every: bool = False) -> None:
    """The recap: how many hosts are ok and FAIL (a step failed or the host was unreachable), then a
    verdict line per set of hosts with the same counts, folded, failed first
    (``node[1-2]  ok    2 ok, 4 changed, 10 skipped``); ``every``: a line per host."""
    from collections import Counter

    from rich.text import Text

    from clusterctl.cli.verdicts import print_folded, verdict_counts
    from clusterctl.provision.executor import STATUSES

    title = f"recap: {report.playbook}" + (" (dry run: nothing was changed)" if report.dry_run else "")
    console.print(Text(safe_text(title)), highlight=False)
    said: dict[str, tuple[str, str | Text]] = {}
    for node, c in report.counts().items():
        tally = Text(", ").join(Text(f"{c[s]} {s}", style=_STYLE[s]) for s in STATUSES if c[s])
        said[node] = ("FAIL" if c["failed"] or c["unreachable"] else "ok", tally)
    console.print(verdict_counts(Counter(word for word, _ in said.values()), ("FAIL", "ok")), highlight=False)
    print_folded(console, said, every=every)


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
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Print every host-step outcome as it arrives (default: changes, failures and unreachable "
        "hosts) and a recap line per node (default: the nodes with the same counts folded on one line).",
    ),
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
            on_result=None if as_json else _Live(every=verbose),
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
    _print_recap(outcome.report, every=verbose)
    if status_dir:
        console.print(
            f"status of every host (topo -m, ip addr, ibstat, ibv_devinfo -v, ofed_info -s): {status_dir}"
        )
    if outcome.image_id is not None:
        print_deliveries(outcome.image_id, outcome.deliveries)
    return 1 if outcome.failed else 0
