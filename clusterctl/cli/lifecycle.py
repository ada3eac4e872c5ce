"""`clusterctl up`, `down` and `status`: the benchmark containers on every node."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clusterctl.cli.common import (
    InventoryOption,
    console,
    err_console,
    finite_seconds,
    load,
    print_json,
)
from clusterctl.terminal import safe_text

if TYPE_CHECKING:
    from clusterctl.containers.lifecycle import ContainerStatus


def up(
    inventory: Path | None = InventoryOption,
    timeout: float = typer.Option(
        60.0,
        "--timeout",
        min=1,
        callback=finite_seconds,
        help="Seconds each stage's sshd may take to answer a login.",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Show what up would do on each node (keep, replace, conflict, start) from the same "
        "read-only survey, with the docker run line of what it would start; change nothing.",
    ),
    force_recreate: bool = typer.Option(
        False,
        "--force-recreate",
        help="Replace every container, also running ones (ends whatever runs in them).",
    ),
) -> int:
    """Start the benchmark containers: secondaries, a readiness gate, then the primary.

    Matching running containers are kept; a running one that differs stops up (exit 1) unless forced.
    """
    from clusterctl.containers import lifecycle
    from clusterctl.image.record import effective_image_ref

    inv = load(inventory)
    image_ref = effective_image_ref(inv)
    if dry_run:
        plan = lifecycle.plan_up(inv, image_ref, force_recreate=force_recreate)
        for line in plan.lines():
            console.print(safe_text(line), markup=False, highlight=False, soft_wrap=True)
        if plan.refusal is not None:
            raise plan.refusal
        return 0
    outcomes = lifecycle.up(
        inv,
        image_ref,
        ready_timeout_s=timeout,
        force_recreate=force_recreate,
        on_event=lambda node, message: err_console.print(f"{node}: {message}", highlight=False),
    )
    actions = Counter(o.action for o in outcomes.values())
    if set(actions) == {"kept"}:
        console.print(
            f"up: unchanged, {len(outcomes)} containers already running {image_ref}; "
            "sshd answering on every node"
        )
    else:
        done = ", ".join(f"{count} {action}" for action, count in sorted(actions.items()))
        console.print(
            f"up: {len(outcomes)} containers running {image_ref} ({done}); sshd answering on every node"
        )
    return 0


def down(inventory: Path | None = InventoryOption) -> int:
    """Remove the benchmark containers on every node (also after a half-failed up)."""
    from clusterctl.containers import lifecycle

    inv = load(inventory)
    outcomes = lifecycle.down(inv)
    for name, outcome in outcomes.items():
        console.print(f"{name}: {outcome.detail if outcome.ok else f'[red]FAILED[/] {outcome.error}'}")
    return 1 if any(not o.ok for o in outcomes.values()) else 0


def status(
    inventory: Path | None = InventoryOption,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also each node's container and image ID."),
) -> int:
    """Per node: image present, container state, sshd answering. Exit 1 if a node could not be asked."""
    from clusterctl.containers import lifecycle
    from clusterctl.image.record import effective_image_ref

    inv = load(inventory)
    image_ref = effective_image_ref(inv)
    statuses = lifecycle.status(inv, image_ref)
    if as_json:
        print_json({"image": image_ref, "nodes": [asdict(s) | {"ok": s.ok} for s in statuses.values()]})
    else:
        print_statuses(image_ref, statuses, verbose=verbose)
    return 1 if any(s.error for s in statuses.values()) else 0


def print_statuses(image_ref: str, statuses: dict[str, ContainerStatus], *, verbose: bool) -> None:
    """How many nodes are ready first, then a verdict line per set of nodes in the same state (container
    state and sshd, or why it could not be asked), folded, failed first (``node[001-128]  ok    container
    running, sshd answering``); ``verbose``: a line per node with its role, container and image ID
    under it."""
    from rich.text import Text

    from clusterctl.cli.image import short_id
    from clusterctl.cli.verdicts import print_folded, verdict_line

    good = sum(s.ok for s in statuses.values())
    console.print(
        Text(safe_text(f"{good} of {len(statuses)} nodes ready to run {image_ref}")), highlight=False
    )
    said: dict[str, tuple[str, str | Text]] = {}
    for s in statuses.values():
        what = s.error or (
            f"container {s.state or 'absent'}, sshd {s.sshd or '-'}"
            + ("" if s.image_id else ", image missing")
        )
        said[s.node] = ("ok" if s.ok else "FAIL", what)
    if not verbose:
        print_folded(console, said)
        return
    width = max((len(name) for name in statuses), default=0)
    for s in statuses.values():
        console.print(verdict_line(s.node, width, *said[s.node]), highlight=False)
        detail = f"  {s.role}; container {s.container or '-'}; image {short_id(s.image_id)}"
        console.print(Text(safe_text(detail)), highlight=False)


def register(app: typer.Typer) -> None:
    """Add up, down and status as top-level commands of ``app``."""
    app.command()(up)
    app.command()(down)
    app.command()(status)
