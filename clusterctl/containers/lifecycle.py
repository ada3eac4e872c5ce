"""The benchmark containers on the nodes: up, down and status (their spec: ``containers.plan``; the sshd
login gate: ``containers.gate``; exec in a container: ``clusterctl.hosts.container_exec``).

The whitepaper's appendix starts one container per node by hand: secondaries first, running
``sshd -p 50000; sleep infinity``, then the primary, which runs mpirun. The image's default command is
a long-lived ``sshd -D -e`` (never ``sshd -d``, which serves one connection: horovod#1226).

``up`` reconciles: it first asks every node, changing nothing, whether this cluster's container is
there, its state, whether its spec label matches what ``up`` would start now, and whether the
sources of the inventory's mounts exist (``up --dry-run`` shows exactly this survey, ``plan_up``).
A missing mount source stops ``up`` before any node is touched. A running, matching
container is kept; an absent, stopped or non-matching stopped one is replaced; a live one that does
not match is a conflict, and ``up`` refuses (before touching any node) unless asked to
``force_recreate``. Then the secondaries start (or, kept, are only checked) in parallel, each one's
sshd must accept a login with the cluster key (verified container host key, bounded by a deadline),
then the primary the same way. If anything fails, or the user presses Ctrl-C or sends SIGTERM, every
container this ``up`` started is removed before the error propagates; kept containers stay.
Containers are found again by their labels, never by image.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import docker
import docker.errors
from docker.models.containers import Container

from clusterctl.containers.gate import LOGIN_ATTEMPT_TIMEOUT_S, SshdNotReady, sshd_login, wait_for_sshd
from clusterctl.containers.plan import (
    CLUSTER_LABEL,
    LIVE_STATES,
    NODE_LABEL,
    SPEC_LABEL,
    Action,
    Found,
    conflict_message,
    container_spec,
    decide,
    difference,
    docker_run_argv,
    docker_run_kwargs,
    missing_mounts_message,
    mount_probe,
    mount_sources,
    parse_mount_probe,
    plan_line,
    spec_hash,
    ssh_material,
    user_processes,
)
from clusterctl.errors import ClusterctlError, InputError, StepError
from clusterctl.hosts.cluster_keys import ClusterKeys, ensure_cluster_keys, node_ssh_dir, node_ssh_files
from clusterctl.hosts.command import CommandResult
from clusterctl.hosts.docker_remote import DOCKER_CALL_TIMEOUT_S, docker_client, node_engine
from clusterctl.hosts.sftp import write_private_dir
from clusterctl.hosts.ssh import connect, fan_out, run
from clusterctl.interrupts import sigterm_interrupts
from clusterctl.inventory import Inventory, Node

# --------------------------------------------------------------------------- per-node outcomes


@dataclass
class NodeOutcome:
    """What one lifecycle step did on one node; ``error`` is set when it failed."""

    node: str
    detail: str = ""
    error: str | None = None
    # up only: what happened to the node's container, "kept", "replaced" or "started".
    action: str | None = None

    @property
    def ok(self) -> bool:
        """The step succeeded on this node."""
        return self.error is None


def _outcomes(results: dict[str, NodeOutcome | CommandResult]) -> dict[str, NodeOutcome]:
    """fan_out's results as outcomes (a node past the deadline comes back as a CommandResult)."""
    return {
        name: r if isinstance(r, NodeOutcome) else NodeOutcome(name, error=r.error)
        for name, r in results.items()
    }


def _failed(outcomes: dict[str, NodeOutcome]) -> dict[str, NodeOutcome]:
    return {name: o for name, o in outcomes.items() if not o.ok}


def _describe(failed: dict[str, NodeOutcome]) -> str:
    return "; ".join(f"{name}: {o.error}" for name, o in failed.items())


def _ours(client: docker.DockerClient, inventory: Inventory, node: Node | None = None) -> list[Container]:
    """This cluster's containers on a node's engine (of one node only, when given)."""
    labels = [f"{CLUSTER_LABEL}={inventory.cluster.name}"]
    if node is not None:
        labels.append(f"{NODE_LABEL}={node.name}")
    return client.containers.list(all=True, filters={"label": labels})


def _remove_ours(inventory: Inventory, node: Node) -> NodeOutcome:
    try:
        with node_engine(inventory, node) as client:
            removed = []
            for container in _ours(client, inventory, node):
                container.remove(force=True)
                removed.append(container.name)
    except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
        return NodeOutcome(node.name, error=str(exc))
    return NodeOutcome(node.name, f"removed {', '.join(removed)}" if removed else "nothing to remove")


# --------------------------------------------------------------------------- up / down / status


class UpConflict(StepError):
    """``up`` refused: a node's container is live but does not match; nothing was changed on any node."""


class MountSourceMissing(InputError):
    """``up`` refused: a mount source of the inventory is not on a node; nothing was started."""


# Seconds the read-only mount-source probe may take on one node.
MOUNT_PROBE_TIMEOUT_S = 30


def _missing_mounts(inventory: Inventory, node: Node) -> list[str]:
    """The inventory's mount sources that do not exist on ``node`` (one read-only SSH command).

    Raises:
        StepError: the probe could not run or did not finish.
        ConnectError: the node is not reachable over SSH.
    """
    paths = mount_sources(inventory)
    if not paths:
        return []
    with connect(inventory, node) as conn:
        result = run(conn, node, mount_probe(paths), timeout_s=MOUNT_PROBE_TIMEOUT_S)
    if not result.ok:
        raise StepError(f"cannot check the mount sources {', '.join(paths)}: {result.error or result.stderr}")
    return parse_mount_probe(result.stdout)


def up_refusal(survey: dict[str, Found | NodeOutcome], inventory: Inventory) -> ClusterctlError | None:
    """Why ``up`` must stop after its read-only survey of the nodes (None: it may go on).

    In this order: a node that could not be asked; mount sources missing; live containers that differ.
    """
    failed = {name: r for name, r in survey.items() if isinstance(r, NodeOutcome)}
    if failed:
        return StepError(f"up: cannot check {', '.join(failed)} (nothing was changed): {_describe(failed)}")
    found = [r for r in survey.values() if isinstance(r, Found)]
    missing = {f.node: f.missing_mounts for f in found if f.missing_mounts}
    if missing:
        return MountSourceMissing(missing_mounts_message(missing, inventory))
    conflicts = [f for f in found if f.action is Action.CONFLICT]
    return UpConflict(conflict_message(conflicts)) if conflicts else None


def _processes(container: Container) -> list[str] | None:
    """The programs running in ``container`` besides its sshd (docker top), or None if the engine cannot say."""
    try:
        return user_processes(container.top())
    except docker.errors.DockerException:
        return None


@dataclass
class _UpRun:
    """State of one ``up``: what it found on each node, and the nodes whose containers it now owns, so
    that a failure or an interrupt removes exactly what it started."""

    inventory: Inventory
    keys: ClusterKeys
    image_ref: str
    ready_timeout_s: float
    on_event: Callable[[str, str], None]
    force_recreate: bool
    abort: threading.Event = field(default_factory=threading.Event)
    found: dict[str, Found] = field(default_factory=dict)
    # Nodes whose old container this up removes: any container of the cluster there is this up's.
    owned: set[str] = field(default_factory=set)

    def inspect(self, node: Node) -> Found | NodeOutcome:
        """Find the node's container and decide what to do with it, changing nothing (errors as outcomes)."""
        try:
            with node_engine(self.inventory, node) as client:
                try:
                    image_id = client.images.get(self.image_ref).id
                except docker.errors.ImageNotFound:
                    return NodeOutcome(
                        node.name,
                        error=f"image {self.image_ref} is not there. Fix: run `clusterctl image push`.",
                    )
                plan = container_spec(self.inventory, node, self.image_ref)
                wanted = spec_hash(plan, image_id, ssh_material(self.keys, node))
                existing = _ours(client, self.inventory, node)
                missing = _missing_mounts(self.inventory, node)
                if not existing:
                    return Found(
                        node.name, decide(None, None, wanted), wanted, plan.name, missing_mounts=missing
                    )
                container = existing[0]
                label = container.labels.get(SPEC_LABEL)
                found = Found(
                    node.name,
                    decide(container.status, label, wanted, force_recreate=self.force_recreate),
                    wanted,
                    container.name,
                    container_id=container.id,
                    state=container.status,
                    differs=difference(container.attrs["Image"], label, image_id, wanted),
                    missing_mounts=missing,
                )
                if found.state in LIVE_STATES and found.action is not Action.KEEP:
                    found.processes = _processes(container)
        except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
            return NodeOutcome(node.name, error=str(exc))
        return found

    def survey(self) -> dict[str, Found | NodeOutcome]:
        """Inspect every node in parallel, changing nothing: each node's Found, or why it could not be asked."""
        results = fan_out(
            self.inventory.nodes,
            self.inspect,
            deadline_s=DOCKER_CALL_TIMEOUT_S * 2 + MOUNT_PROBE_TIMEOUT_S + 30,
        )
        return {
            name: r if isinstance(r, Found | NodeOutcome) else NodeOutcome(name, error=r.error)
            for name, r in results.items()
        }

    def plan(self) -> None:
        """Survey every node and decide; raise, having changed nothing, if up cannot go on.

        Raises:
            StepError: a node could not be asked, or lacks the image.
            MountSourceMissing: a mount source of the inventory is not on a node.
            UpConflict: a node's container is live but does not match (and ``force_recreate`` is off).
        """
        survey = self.survey()
        refusal = up_refusal(survey, self.inventory)
        if refusal is not None:
            raise refusal
        self.found = {name: r for name, r in survey.items() if isinstance(r, Found)}

    def prepare(self, node: Node) -> NodeOutcome:
        """Push the node's container SSH files and remove its old container (a node being replaced)."""
        try:
            with connect(self.inventory, node) as conn:
                write_private_dir(conn.sftp(), node_ssh_dir(self.inventory), node_ssh_files(self.keys, node))
            self.owned.add(node.name)
            with node_engine(self.inventory, node) as client:
                for container in _ours(client, self.inventory, node):
                    container.remove(force=True)
        except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
            return NodeOutcome(node.name, error=str(exc))
        removed = ", old container removed" if self.found[node.name].container_id else ""
        self.on_event(node.name, f"ssh files in {node_ssh_dir(self.inventory)}{removed}")
        return NodeOutcome(node.name, "prepared")

    def start_and_gate(self, node: Node, deadline: float) -> NodeOutcome:
        """Start the node's container (a kept one is only looked up), then wait until its sshd answers."""
        if self.abort.is_set():
            return NodeOutcome(node.name, error="not started: up was aborted")
        found = self.found[node.name]
        plan = container_spec(self.inventory, node, self.image_ref)
        try:
            client = docker_client(self.inventory, node, timeout_s=DOCKER_CALL_TIMEOUT_S)
        except ClusterctlError as exc:
            return NodeOutcome(node.name, error=str(exc))
        with contextlib.closing(client):
            try:
                if found.action is Action.KEEP:
                    container = client.containers.get(found.container_id)
                else:
                    labels = plan.labels | {SPEC_LABEL: found.wanted}
                    container = client.containers.create(**docker_run_kwargs(plan) | {"labels": labels})
                    if self.abort.is_set():
                        container.remove(force=True)
                        return NodeOutcome(node.name, error="removed: up was aborted")
                    container.start()
            except docker.errors.DockerException as exc:
                return NodeOutcome(node.name, error=f"cannot start {plan.name}: {exc}")
            self.on_event(node.name, f"{found.summary()}; waiting for its sshd")
            try:
                detail = wait_for_sshd(
                    self.inventory, self.keys, node, container, deadline=deadline, abort=self.abort
                )
                outcome = NodeOutcome(node.name, detail)
            except SshdNotReady as exc:
                outcome = NodeOutcome(node.name, error=str(exc))
        self.on_event(node.name, outcome.detail if outcome.ok else f"FAILED: {outcome.error}")
        outcome.action = found.verb
        return outcome

    def stage(self, nodes: Sequence[Node], what: str) -> dict[str, NodeOutcome]:
        """Start and gate ``nodes`` in parallel; raise StepError naming every node that failed."""
        deadline = time.monotonic() + self.ready_timeout_s
        outcomes = _outcomes(
            fan_out(
                nodes,
                lambda n: self.start_and_gate(n, deadline),
                deadline_s=self.ready_timeout_s + DOCKER_CALL_TIMEOUT_S,
            )
        )
        failed = _failed(outcomes)
        if failed:
            raise StepError(f"up: {what} not ready on {', '.join(failed)}: {_describe(failed)}")
        return outcomes

    def teardown(self) -> dict[str, NodeOutcome]:
        """Remove what this ``up`` started: the cluster's containers on the nodes it owns (never kept ones)."""
        self.abort.set()
        owned = [node for node in self.inventory.nodes if node.name in self.owned]
        return _outcomes(
            fan_out(owned, lambda n: _remove_ours(self.inventory, n), deadline_s=DOCKER_CALL_TIMEOUT_S * 2)
        )


def up(
    inventory: Inventory,
    image_ref: str,
    *,
    ready_timeout_s: float = 60.0,
    force_recreate: bool = False,
    on_event: Callable[[str, str], None] = lambda node, message: None,
) -> dict[str, NodeOutcome]:
    """Bring the benchmark containers to what the inventory asks: every secondary, a readiness gate, then
    the primary. A running container that matches is kept (only its sshd is checked); others are replaced.

    Args:
        inventory: the cluster.
        image_ref: the image to run (see ``clusterctl.image.record.effective_image_ref``).
        ready_timeout_s: deadline for each stage's sshd to answer a login with the cluster key.
        force_recreate: replace every container, also live ones that match or do not.
        on_event: called with (node, message) as the start progresses.

    Returns:
        Each node's outcome, all ok; ``action`` says whether its container was kept, replaced or started.

    Raises:
        UpConflict: a node's container is live but does not match what up would start (a benchmark may
            run in it) and ``force_recreate`` is off; the message names those nodes and the fix.
            Nothing was changed on any node.
        MountSourceMissing: a source of ``container.mounts`` is not on a node (exit 2); the message names
            the nodes and paths. Nothing was changed on any node.
        StepError: a node could not be inspected, prepared or started, or its sshd did not answer in
            time; the message names those hosts. Every container this up started has been removed.
        KeyboardInterrupt: Ctrl-C or SIGTERM; every container this up started has been removed.
    """
    run = _UpRun(
        inventory, ensure_cluster_keys(inventory), image_ref, ready_timeout_s, on_event, force_recreate
    )
    with sigterm_interrupts():
        run.plan()
        try:
            replaced = [n for n in inventory.nodes if run.found[n.name].action is Action.REPLACE]
            prepared = _outcomes(fan_out(replaced, run.prepare, deadline_s=DOCKER_CALL_TIMEOUT_S * 2 + 30))
            failed = _failed(prepared)
            if failed:
                raise StepError(f"up: cannot prepare {', '.join(failed)}: {_describe(failed)}")
            outcomes = (
                run.stage(inventory.secondaries, "secondary containers") if inventory.secondaries else {}
            )
            outcomes |= run.stage([inventory.primary], "primary container")
        except BaseException:
            removed = run.teardown()
            for name, outcome in removed.items():
                on_event(
                    name, f"cleanup: {outcome.detail}" if outcome.ok else f"cleanup FAILED: {outcome.error}"
                )
            raise
    return outcomes


@dataclass(frozen=True)
class NodeUpPlan:
    """What ``up`` would do on one node: the plan line, and the ``docker run`` argv of what it would start."""

    node: str
    role: str
    what: str  # ``plan_line`` of the node's container, or why the node could not be asked
    docker_run: list[str] | None = None  # set where up would start (or replace) the container

    def lines(self) -> list[str]:
        """The node as ``up --dry-run`` shows it: its plan line, then its ``docker run`` line if any."""
        lines = [f"{self.node} ({self.role}): {self.what}"]
        if self.docker_run is not None:
            lines.append(f"  {shlex.join(self.docker_run)}")
        return lines


@dataclass(frozen=True)
class UpPlan:
    """What ``up`` would do on every node (secondaries first, then the primary), and why it would stop."""

    nodes: list[NodeUpPlan]
    refusal: ClusterctlError | None  # see ``up_refusal``; None: up would go on

    def lines(self) -> list[str]:
        """Every node's lines, in the order ``up`` starts them."""
        return [line for node in self.nodes for line in node.lines()]


def up_plan_of(survey: dict[str, Found | NodeOutcome], inventory: Inventory, image_ref: str) -> UpPlan:
    """The plan ``up --dry-run`` shows, from a read-only survey (pure)."""
    nodes = []
    for node in [*inventory.secondaries, inventory.primary]:
        found = survey[node.name]
        if not isinstance(found, Found):
            nodes.append(NodeUpPlan(node.name, node.role, f"unknown ({found.error})"))
            continue
        starts = found.action is Action.REPLACE
        argv = docker_run_argv(container_spec(inventory, node, image_ref)) if starts else None
        nodes.append(NodeUpPlan(node.name, node.role, plan_line(found), argv))
    return UpPlan(nodes, up_refusal(survey, inventory))


def plan_up(inventory: Inventory, image_ref: str, *, force_recreate: bool = False) -> UpPlan:
    """What ``up`` would do on each node, from the same read-only survey ``up`` starts with (``up --dry-run``).

    Nothing changes on any node; the cluster's SSH keys are created on this machine if missing (the
    spec hash covers their public halves). The plan's ``refusal`` says whether ``up`` would stop.
    """
    run = _UpRun(
        inventory, ensure_cluster_keys(inventory), image_ref, 0.0, lambda node, message: None, force_recreate
    )
    return up_plan_of(run.survey(), inventory, image_ref)


def down(inventory: Inventory) -> dict[str, NodeOutcome]:
    """Remove this cluster's benchmark containers on every node (idempotent); each node's outcome."""
    return _outcomes(
        fan_out(inventory.nodes, lambda n: _remove_ours(inventory, n), deadline_s=DOCKER_CALL_TIMEOUT_S * 2)
    )


@dataclass
class ContainerStatus:
    """A node's benchmark container as ``clusterctl status`` sees it; ``error``: the node could not be asked."""

    node: str
    role: str
    image_id: str | None = None
    container: str | None = None
    state: str | None = None
    sshd: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The image is there, the container runs and its sshd answered."""
        return (
            self.error is None
            and self.image_id is not None
            and self.state == "running"
            and self.sshd == "answering"
        )


def status(inventory: Inventory, image_ref: str) -> dict[str, ContainerStatus]:
    """Per node: image present (its ID), container state, whether its sshd answers a cluster-key login."""
    keys = ensure_cluster_keys(inventory)

    def one(node: Node) -> ContainerStatus:
        result = ContainerStatus(node.name, node.role)
        try:
            with node_engine(inventory, node) as client:
                with contextlib.suppress(docker.errors.ImageNotFound):
                    result.image_id = client.images.get(image_ref).id
                containers = _ours(client, inventory, node)
        except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
            result.error = str(exc)
            return result
        if containers:
            result.container, result.state = containers[0].name, containers[0].status
        if result.state == "running":
            reason = sshd_login(inventory, keys, node)
            result.sshd = "answering" if reason is None else f"not answering ({reason})"
        return result

    results = fan_out(inventory.nodes, one, deadline_s=DOCKER_CALL_TIMEOUT_S + LOGIN_ATTEMPT_TIMEOUT_S * 4)
    return {
        name: r
        if isinstance(r, ContainerStatus)
        else ContainerStatus(name, inventory.node(name).role, error=r.error)
        for name, r in results.items()
    }
