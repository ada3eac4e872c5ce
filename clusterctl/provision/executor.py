"""The playbook executor: for every step, probe every node in parallel, change only where the probe
fails, verify, and record one outcome per host and step.

Outcomes: ok (already as wanted), changed, would-change (dry run), failed, skipped (with the reason),
unreachable. One host failing never stops the others; a step whose ``depends_on`` failed on a host is
skipped there. A dry run runs every read-only probe and changes nothing. What the steps are rendered
with (``step_context``) and may upload (``step_files``) is ``clusterctl.provision.plan``'s.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import fabric
import paramiko

from clusterctl.diagnostics.collect import capture_status
from clusterctl.errors import ConnectError
from clusterctl.hosts.command import CommandResult
from clusterctl.hosts.sftp import write_file
from clusterctl.hosts.ssh import connect, fan_out, run
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import data_dir
from clusterctl.provision.plan import StepFile, step_context, step_files
from clusterctl.provision.playbook import (
    Playbook,
    RenderedStep,
    Step,
    load_playbook,
    nodes_in_limit,
    render_step,
    select_steps,
)

if TYPE_CHECKING:
    from clusterctl.image.distribute import DeliveryResult

Status = Literal["ok", "changed", "would-change", "failed", "skipped", "unreachable"]
STATUSES: tuple[Status, ...] = ("ok", "changed", "would-change", "failed", "skipped", "unreachable")
# Seconds allowed for the parallel connect phase beyond each node's own connect timeout.
CONNECT_SLACK_S = 15


@dataclass
class HostStepResult:
    """What one step did on one host."""

    node: str
    step: str
    status: Status
    reason: str = ""
    duration_s: float = 0.0


@dataclass
class ProvisionReport:
    """Every host-step outcome of one provision run, in execution order."""

    playbook: str
    dry_run: bool
    results: list[HostStepResult] = field(default_factory=list)

    def counts(self) -> dict[str, Counter[str]]:
        """Per host: how many steps ended in each status."""
        out: dict[str, Counter[str]] = {}
        for r in self.results:
            out.setdefault(r.node, Counter())[r.status] += 1
        return out

    @property
    def failed(self) -> bool:
        """Whether any host failed a step or was unreachable."""
        return any(r.status in ("failed", "unreachable") for r in self.results)

    def to_json(self) -> dict[str, Any]:
        """The report as plain data for ``--json``."""
        return {
            "playbook": self.playbook,
            "dry_run": self.dry_run,
            "hosts": {node: {s: c[s] for s in STATUSES} for node, c in self.counts().items()},
            "steps": [asdict(r) for r in self.results],
        }


def _tail(result: CommandResult, lines: int = 6) -> str:
    text = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return " | ".join(text[-lines:])


def run_step_on_host(
    conn: fabric.Connection, node: Node, rendered: RenderedStep, files: dict[str, StepFile], *, dry_run: bool
) -> HostStepResult:
    """check → (upload → apply → verify) for one rendered step on one host.

    Uploads happen only where the probe failed and it is not a dry run; ``files`` maps each upload's
    ``source`` to its content (see ``step_files``).
    """
    step, start = rendered.step, time.monotonic()

    def result(status: Status, reason: str = "") -> HostStepResult:
        return HostStepResult(node.name, step.name, status, reason, round(time.monotonic() - start, 2))

    def outcome_of(res: CommandResult, phase: str) -> HostStepResult | None:
        if res.unreachable:
            return result("unreachable", f"{phase}: {res.error}")
        if res.error:
            return result("failed", f"{phase}: {res.error}")
        return None

    probe = run(conn, node, rendered.check, timeout_s=step.timeout_s)
    if (bad := outcome_of(probe, "check")) is not None:
        return bad
    if probe.exit_code == 0:
        return result("ok")
    if dry_run:
        return result("would-change", f"check exited {probe.exit_code}")
    try:
        for source, dest, mode in rendered.uploads:
            if source not in files:
                return result(
                    "failed", f"upload: no file named {source!r} (known: {', '.join(sorted(files))})"
                )
            write_file(conn.sftp(), files[source], dest, mode)
    except OSError as exc:
        return result("failed", f"upload: {exc}")
    except (paramiko.SSHException, EOFError) as exc:  # the connection dropped mid-transfer
        return result("unreachable", f"upload: connection lost ({exc or type(exc).__name__})")
    applied = run(conn, node, rendered.apply, timeout_s=step.timeout_s)
    if (bad := outcome_of(applied, "apply")) is not None:
        return bad
    if applied.exit_code != 0:
        return result("failed", f"apply exited {applied.exit_code}: {_tail(applied)}")
    verified = run(conn, node, rendered.verify, timeout_s=step.timeout_s)
    if (bad := outcome_of(verified, "verify")) is not None:
        return bad
    if verified.exit_code != 0:
        return result(
            "failed", f"applied, but the probe still fails (exit {verified.exit_code}): {_tail(verified)}"
        )
    return result("changed")


def provision(
    inventory: Inventory,
    playbook: Playbook,
    steps: list[Step],
    nodes: list[Node],
    *,
    dry_run: bool = False,
    accept_new: bool = False,
    on_result: Callable[[HostStepResult], None] | None = None,
) -> ProvisionReport:
    """Run ``steps`` of ``playbook`` on ``nodes`` in parallel and return every outcome.

    ``on_result`` is called as each host-step outcome arrives (for live progress).
    """
    report = ProvisionReport(playbook.name, dry_run)

    def record(r: HostStepResult) -> None:
        report.results.append(r)
        if on_result:
            on_result(r)

    def open_one(node: Node) -> fabric.Connection | ConnectError:
        try:
            return connect(inventory, node, accept_new=accept_new)
        except ConnectError as exc:
            return exc

    deadline = max(n.ssh.connect_timeout_s for n in nodes) * 2 + CONNECT_SLACK_S
    opened = fan_out(nodes, open_one, deadline_s=deadline)
    conns: dict[str, fabric.Connection] = {}
    down: dict[str, str] = {}
    for node in nodes:
        value = opened[node.name]
        if isinstance(value, fabric.Connection):
            conns[node.name] = value
        else:
            down[node.name] = str(value.error if isinstance(value, CommandResult) else value)
    host_keys = {
        name: f"{key.get_name()} {key.get_base64()}"
        for name, conn in conns.items()
        if (key := conn.client.get_transport().get_remote_server_key()) is not None
    }
    context = step_context(inventory, host_keys)
    files = step_files(inventory)
    failed_steps: dict[str, set[str]] = {n.name: set() for n in nodes}
    try:
        for step in steps:
            for name, reason in down.items():
                record(HostStepResult(name, step.name, "unreachable", reason))
            live = [n for n in nodes if n.name in conns and n.name not in down]

            def one(node: Node, step: Step = step) -> HostStepResult:
                blocked = [d for d in step.depends_on if d in failed_steps[node.name]]
                if blocked:
                    return HostStepResult(
                        node.name, step.name, "skipped", f"depends on {', '.join(blocked)}, which failed"
                    )
                rendered = render_step(step, node, context)
                if rendered.skip_reason:
                    return HostStepResult(node.name, step.name, "skipped", rendered.skip_reason)
                return run_step_on_host(conns[node.name], node, rendered, files, dry_run=dry_run)

            outcomes = fan_out(live, one, deadline_s=step.timeout_s * 3 + CONNECT_SLACK_S)
            for node in live:
                r = outcomes[node.name]
                if isinstance(r, CommandResult):  # the step's deadline passed on this host
                    r = HostStepResult(node.name, step.name, "failed", r.error or "no answer")
                if r.status in ("failed", "unreachable"):
                    failed_steps[node.name].add(step.name)
                if r.status == "unreachable":
                    down[node.name] = r.reason
                record(r)
    finally:
        for conn in conns.values():
            conn.close()
    return report


@dataclass
class ProvisionOutcome:
    """What `clusterctl provision` did: the playbook's report, the status bundle, the image delivery."""

    report: ProvisionReport
    status_dir: Path | None = None  # None on a dry run
    image_id: str | None = None  # None unless the image was delivered
    deliveries: dict[str, DeliveryResult] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """A host failed a step or was unreachable, or the image did not reach a node."""
        return self.report.failed or any(not d.ok for d in self.deliveries.values())


def provision_cluster(
    inventory: Inventory,
    *,
    playbook_path: Path | None = None,
    step_names: Sequence[str] = (),
    limit: str | None = None,
    dry_run: bool = False,
    accept_new: bool = False,
    deliver_image: bool = False,
    on_result: Callable[[HostStepResult], None] | None = None,
    on_bytes: Callable[[str, int], None] = lambda node, n: None,
) -> ProvisionOutcome:
    """Set up the hosts, then save their status, then (when asked) deliver the built image.

    The stages of `clusterctl provision`, in order: the playbook's steps (``step_names``, all when
    empty) on the nodes of ``limit`` (all when None); unless ``dry_run``, a status bundle of those
    nodes (``capture_status``) and, with ``deliver_image``, the image delivered to every node. A host
    that fails does not stop the later stages: the bundle shows its state, the others get the image.

    Args:
        playbook_path: the playbook file; default: the shipped ``host-setup.yml``.
        on_result: called with each host-step outcome as it arrives (live progress).
        on_bytes: called with (node, bytes) for every chunk of the image sent.

    Raises:
        InputError: a bad playbook, step name or ``--limit``; nothing was run on any host.
    """
    playbook = load_playbook(playbook_path or data_dir("playbooks") / "host-setup.yml")
    steps = select_steps(playbook, list(step_names))
    nodes = nodes_in_limit(inventory, limit)
    report = provision(
        inventory, playbook, steps, nodes, dry_run=dry_run, accept_new=accept_new, on_result=on_result
    )
    if dry_run:
        return ProvisionOutcome(report)
    outcome = ProvisionOutcome(report, status_dir=capture_status(inventory, nodes))
    if deliver_image:
        from clusterctl.image.distribute import distribute  # imported on use: the docker client

        outcome.image_id, outcome.deliveries = distribute(inventory, on_bytes=on_bytes)
    return outcome
