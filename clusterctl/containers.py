"""The benchmark containers on the nodes: up, down, status and exec (their spec: ``container_plan``).

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
import logging
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import docker
import docker.errors
import paramiko
from docker.models.containers import Container

from clusterctl.container_plan import (
    CLUSTER_LABEL,
    LIVE_STATES,
    NODE_LABEL,
    SPEC_LABEL,
    Action,
    Found,
    conflict_message,
    container_name,
    container_spec,
    decide,
    difference,
    docker_run_kwargs,
    missing_mounts_message,
    mount_probe,
    mount_sources,
    parse_mount_probe,
    spec_hash,
    ssh_material,
    user_processes,
)
from clusterctl.errors import ClusterctlError, InputError, RunFailed, StepError
from clusterctl.hosts.cluster_keys import ClusterKeys, ensure_cluster_keys, node_ssh_dir, push_ssh_dir
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import CommandResult, connect, fan_out, run
from clusterctl.interrupts import sigterm_interrupts
from clusterctl.inventory import Inventory, Node

# paramiko logs a traceback for every refused banner; the readiness gate reports the reason itself.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

# The user mpirun logs in as between containers (the image's sshd permits key-only root login).
CONTAINER_USER = "root"
# Seconds one docker API call on a node may take (create, start, remove, inspect).
DOCKER_CALL_TIMEOUT_S = 60
# One SSH login attempt at a container's sshd: connect, banner, auth, `true`.
LOGIN_ATTEMPT_TIMEOUT_S = 5.0
# Backoff between readiness attempts: first wait, growth factor, longest wait.
BACKOFF_FIRST_S, BACKOFF_FACTOR, BACKOFF_MAX_S = 0.25, 2.0, 4.0


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


@contextlib.contextmanager
def _node_client(
    inventory: Inventory, node: Node, timeout_s: int = DOCKER_CALL_TIMEOUT_S
) -> Iterator[docker.DockerClient]:
    client = docker_client(inventory, node, timeout_s=timeout_s)
    try:
        yield client
    finally:
        client.close()


def _ours(client: docker.DockerClient, inventory: Inventory, node: Node | None = None) -> list[Container]:
    """This cluster's containers on a node's engine (of one node only, when given)."""
    labels = [f"{CLUSTER_LABEL}={inventory.cluster.name}"]
    if node is not None:
        labels.append(f"{NODE_LABEL}={node.name}")
    return client.containers.list(all=True, filters={"label": labels})


def _remove_ours(inventory: Inventory, node: Node) -> NodeOutcome:
    try:
        with _node_client(inventory, node) as client:
            removed = []
            for container in _ours(client, inventory, node):
                container.remove(force=True)
                removed.append(container.name)
    except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
        return NodeOutcome(node.name, error=str(exc))
    return NodeOutcome(node.name, f"removed {', '.join(removed)}" if removed else "nothing to remove")


# --------------------------------------------------------------------------- readiness


def sshd_login(
    inventory: Inventory, keys: ClusterKeys, node: Node, timeout_s: float = LOGIN_ATTEMPT_TIMEOUT_S
) -> str | None:
    """One SSH login at ``node``'s container sshd with the cluster key, running ``true``, within ``timeout_s``.

    The container host key is checked against the cluster's known_hosts (unknown keys are refused).
    Returns None when the login worked, else the reason it did not.
    """
    client = paramiko.SSHClient()
    client.load_host_keys(str(keys.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            node.address,
            port=inventory.container.sshd_port,
            username=CONTAINER_USER,
            key_filename=str(keys.client_key),
            look_for_keys=False,
            allow_agent=False,
            timeout=timeout_s,
            banner_timeout=timeout_s,
            auth_timeout=timeout_s,
        )
        _, stdout, _ = client.exec_command("true", timeout=timeout_s)
        code = stdout.channel.recv_exit_status()
        return None if code == 0 else f"`true` exited {code}"
    except (paramiko.SSHException, OSError, EOFError) as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        client.close()


def _exited_reason(container: Container) -> str | None:
    """Why the container is no longer running (its state and log tail), or None while it runs."""
    container.reload()
    if container.status in ("created", "running", "restarting"):
        return None
    logs = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
    return f"container {container.status} (exit {container.attrs['State'].get('ExitCode')}): {logs or 'no output'}"


def wait_ready(
    inventory: Inventory,
    keys: ClusterKeys,
    node: Node,
    container: Container,
    *,
    deadline: float,
    abort: threading.Event,
) -> NodeOutcome:
    """Retry an SSH login at ``node``'s container sshd with exponential backoff until ``deadline``.

    Stops early when the container has exited (its log tail is the reason) or ``abort`` is set.
    """
    where = f"{node.address}:{inventory.container.sshd_port}"
    start, delay, attempts = time.monotonic(), BACKOFF_FIRST_S, 0
    while True:
        attempts += 1
        remaining = max(deadline - time.monotonic(), 0.5)
        reason = sshd_login(inventory, keys, node, min(LOGIN_ATTEMPT_TIMEOUT_S, remaining))
        if reason is None:
            return NodeOutcome(node.name, f"sshd answered on {where} after {time.monotonic() - start:.1f} s")
        exited = _exited_reason(container)
        if exited:
            return NodeOutcome(node.name, error=f"sshd on {where} cannot answer: {exited}")
        if abort.is_set() or time.monotonic() + delay > deadline:
            return NodeOutcome(
                node.name,
                error=f"sshd on {where} did not answer an SSH login with the cluster key within "
                f"{time.monotonic() - start:.0f} s ({attempts} attempts; last: {reason})",
            )
        abort.wait(delay)
        delay = min(delay * BACKOFF_FACTOR, BACKOFF_MAX_S)


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
            with _node_client(self.inventory, node) as client:
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
                push_ssh_dir(conn, self.inventory, self.keys, node)
            self.owned.add(node.name)
            with _node_client(self.inventory, node) as client:
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
            outcome = wait_ready(
                self.inventory, self.keys, node, container, deadline=deadline, abort=self.abort
            )
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
        image_ref: the image to run (see ``clusterctl.image.build.effective_image_ref``).
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


def plan_up(
    inventory: Inventory, image_ref: str, *, force_recreate: bool = False
) -> dict[str, Found | NodeOutcome]:
    """What ``up`` would do on each node, from the same read-only survey ``up`` starts with.

    Nothing changes on any node; the cluster's SSH keys are created on this machine if missing (the
    spec hash covers their public halves). ``up_refusal`` of the result says whether ``up`` would stop.
    """
    run = _UpRun(
        inventory, ensure_cluster_keys(inventory), image_ref, 0.0, lambda node, message: None, force_recreate
    )
    return run.survey()


def down(inventory: Inventory) -> dict[str, NodeOutcome]:
    """Remove this cluster's benchmark containers on every node (idempotent); each node's outcome."""
    return _outcomes(
        fan_out(inventory.nodes, lambda n: _remove_ours(inventory, n), deadline_s=DOCKER_CALL_TIMEOUT_S * 2)
    )


@dataclass
class NodeStatus:
    """One node as ``clusterctl status`` sees it. ``error`` is set when the node could not be asked."""

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


def status(inventory: Inventory, image_ref: str) -> dict[str, NodeStatus]:
    """Per node: image present (its ID), container state, whether its sshd answers a cluster-key login."""
    keys = ensure_cluster_keys(inventory)

    def one(node: Node) -> NodeStatus:
        result = NodeStatus(node.name, node.role)
        try:
            with _node_client(inventory, node) as client:
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
        name: r if isinstance(r, NodeStatus) else NodeStatus(name, inventory.node(name).role, error=r.error)
        for name, r in results.items()
    }


# --------------------------------------------------------------------------- exec in a container


# The in-container `timeout` fires this long after the controller's own deadline (which normally wins).
BACKSTOP_GRACE_S = 30


class ExecTimedOut(RunFailed):
    """A command run with ``exec_in_container`` passed its timeout and was killed."""


def _exec_wrapper(argv: Sequence[str], pid_file: str, timeout_s: float) -> list[str]:
    """``argv`` in its own session (so one kill reaches all its children), with its pid recorded and
    ``timeout`` as a backstop in the container should the controller vanish."""
    script = 'echo $$ > "$0"; exec timeout -k 10 "$1" "${@:2}"'
    return ["setsid", "--wait", "bash", "-c", script, pid_file, f"{timeout_s + BACKSTOP_GRACE_S:g}", *argv]


def _kill_session(inventory: Inventory, node: Node, container_id: str, pid_file: str) -> str | None:
    """TERM, then KILL after 5 s, the process group whose leader's pid is in ``pid_file``.

    Over a fresh connection: the one that carried a long exec stream may be dead (see
    ``exec_in_container``), and a kill sent on it was lost without a word: a run past its timeout
    was reported killed while mpirun and every rank went on. Returns why the kill failed, or None.
    """
    script = (
        f'p=$(cat {shlex.quote(pid_file)} 2>/dev/null) || exit 0; kill -TERM -- -"$p" 2>/dev/null; '
        f'for _ in 1 2 3 4 5; do kill -0 -- -"$p" 2>/dev/null || exit 0; sleep 1; done; kill -KILL -- -"$p"'
    )
    try:
        with _node_client(inventory, node) as client:
            exec_id = client.api.exec_create(container_id, ["bash", "-c", script])["Id"]
            client.api.exec_start(exec_id)
            code = client.api.exec_inspect(exec_id)["ExitCode"]
    except (ClusterctlError, docker.errors.DockerException, OSError) as exc:
        return str(exc)
    return None if code == 0 else f"the kill exited {code}"


def exec_in_container(
    inventory: Inventory,
    node: Node,
    argv: list[str],
    *,
    env: dict[str, str] | None,
    timeout_s: float,
    on_line: Callable[[str], None],
) -> int:
    """Run ``argv`` in ``node``'s benchmark container, streaming its output lines; return its exit code.

    stdout and stderr arrive interleaved, one ``on_line`` call per line (without the newline). The
    command runs in its own session in the container; on timeout or Ctrl-C that whole session is
    killed (TERM, then KILL) before this returns.

    Raises:
        ExecTimedOut: the command ran past ``timeout_s`` (it has been killed).
        StepError: the node's benchmark container is not there (run ``clusterctl up``).
        ConnectError: the node's engine is not reachable.
        KeyboardInterrupt: re-raised after the command was killed.
    """
    pid_file = f"/tmp/clusterctl-exec-{uuid.uuid4().hex}.pid"
    client = docker_client(inventory, node, timeout_s=int(timeout_s) + DOCKER_CALL_TIMEOUT_S)
    with contextlib.closing(client):
        try:
            container = client.containers.get(container_name(inventory, node))
        except docker.errors.NotFound:
            raise StepError(
                f"{node.name}: no benchmark container {container_name(inventory, node)}. Fix: run `clusterctl up`."
            ) from None
        exec_id = client.api.exec_create(
            container.id,
            _exec_wrapper(argv, pid_file, timeout_s),
            environment=env or {},
            stdout=True,
            stderr=True,
        )["Id"]
        stream = client.api.exec_start(exec_id, stream=True)
        failure: list[BaseException] = []

        def pump() -> None:
            buffer = b""
            try:
                for chunk in stream:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        on_line(line.decode(errors="replace").rstrip("\r"))
                if buffer:
                    on_line(buffer.decode(errors="replace"))
            except Exception as exc:
                failure.append(exc)

        reader = threading.Thread(target=pump, name=f"clusterctl-exec-{node.name}", daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout_s
        try:
            while reader.is_alive() and time.monotonic() < deadline:
                reader.join(min(0.5, max(deadline - time.monotonic(), 0)))
        except KeyboardInterrupt:
            _kill_session(inventory, node, container.id, pid_file)
            raise
        if reader.is_alive():
            failed = _kill_session(inventory, node, container.id, pid_file)
            outcome = "was killed" if failed is None else f"could NOT be killed ({failed}); it may still run"
            raise ExecTimedOut(f"{node.name}: {shlex.join(argv)} ran past {timeout_s:g} s and {outcome}.")
        if failure:
            raise StepError(f"{node.name}: output stream of {shlex.join(argv)} broke: {failure[0]}")
    # A fresh connection for the calls after the stream: on the one that carried a long exec, the
    # next request failed with "Socket is closed" (paramiko) once the ranks had finished (seen twice
    # on the loaded sandbox, after 10-minute runs), turning a finished benchmark into a crash. The
    # pool's retry of a request whose reused channel closed under it (hosts/docker_remote.py) covers
    # the GET below but not the POST that creates the `rm` exec, which is never sent twice; and the
    # kill above must use a new SSH session anyway (test_exec_kill freezes the stream's session, on
    # which any new channel would hang too). So both keep their fresh connection.
    with _node_client(inventory, node) as after:
        with contextlib.suppress(docker.errors.DockerException):
            after.api.exec_start(after.api.exec_create(container.id, ["rm", "-f", pid_file])["Id"])
        code = after.api.exec_inspect(exec_id)["ExitCode"]
    return int(code) if code is not None else -1
