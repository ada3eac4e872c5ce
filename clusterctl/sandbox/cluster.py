"""Bring a sandbox up, report its status, take it down.

``up`` converges the local engine to the plan: it creates what is missing, starts what is stopped,
removes nodes beyond the asked-for count, and changes nothing when all is in place (a second ``up``
is a no-op that reports the sandbox as up). Every name it would use is checked for a clash with a
foreign object before anything is created. What one ``up`` created is removed again if it fails or
is interrupted. ``down`` removes every container, network and volume labelled with the sandbox's
name, and the sandbox's files; it is idempotent.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import docker
from docker.errors import NotFound
from docker.models.containers import Container

from clusterctl.errors import ClusterctlError, EnvironmentProblem, InputError
from clusterctl.hosts.sshkeys import ensure_keypair
from clusterctl.image.registry import ensure_tls, untrust_on_controller
from clusterctl.inventory import load_inventory, parse_cpu_list
from clusterctl.paths import cluster_state_dir
from clusterctl.sandbox import lightpython
from clusterctl.sandbox import nodes as node_ops
from clusterctl.sandbox import slurm as sandbox_slurm
from clusterctl.sandbox.engine import allowed_cpus, detect_isolation, local_engine
from clusterctl.sandbox.inventory import wheelhouse, write_inventory
from clusterctl.sandbox.nodeimage import ensure_node_image
from clusterctl.sandbox.plan import (
    DEFAULT_SUBNET,
    LABEL,
    CpuPlan,
    NodePlan,
    SandboxPlan,
    plan_cpus,
    plan_sandbox,
    plan_shaped_cpus,
)
from clusterctl.sandbox.state import SandboxFiles, SandboxState, read_state, sandbox_files, write_state

Log = Callable[[str], None]
# Node containers created and started at once by `up`.
CREATE_PARALLEL = 8


@dataclass
class NodeStatus:
    """One node as the local engine sees it."""

    name: str
    container: str
    address: str
    state: str  # the container's status (running, exited, ...) or "missing"
    sshd: bool
    cpus: str  # the CPUs the node is limited to (its cpuset, e.g. "0-1"); "" when none is set


@dataclass
class SandboxStatus:
    """A sandbox's overall state (up, degraded or down), its nodes and where its files are."""

    name: str | None
    state: str
    nodes: list[NodeStatus] = field(default_factory=list)
    network: str | None = None
    subnet: str | None = None
    node_image: str | None = None
    isolation: str | None = None
    files: SandboxFiles = field(default_factory=sandbox_files)
    changes: list[str] = field(default_factory=list)
    slurm: bool = False  # whether the nodes run Slurm (`up --slurm`)
    light: bool = False  # whether the nodes are light: sshd (and slurmd), no engine (`up --light`)

    @property
    def shared_cpus(self) -> bool:
        """Whether two nodes may run on a same CPU (more nodes than CPUs, or a node without a cpuset).

        Then a multi-node run's throughput measures contention between the nodes, not scaling.
        """
        if any(not n.cpus for n in self.nodes):
            return len(self.nodes) > 1
        used = [cpu for n in self.nodes for cpu in parse_cpu_list(n.cpus)]
        return len(used) != len(set(used))

    def to_json(self) -> dict[str, object]:
        """The status as plain data for ``--json``."""
        return {
            "name": self.name,
            "state": self.state,
            "network": self.network,
            "subnet": self.subnet,
            "node_image": self.node_image,
            "isolation": self.isolation,
            "inventory": str(self.files.inventory),
            "identity_file": str(self.files.private_key),
            "known_hosts": str(self.files.known_hosts),
            "nodes": [vars(n) for n in self.nodes],
            "shared_cpus": self.shared_cpus,
            "slurm": self.slurm,
            "light": self.light,
            "changes": self.changes,
        }


def _foreign(labels: dict[str, str] | None, name: str) -> bool:
    return (labels or {}).get(LABEL) != name


def find_clashes(client: docker.DockerClient, plan: SandboxPlan) -> list[str]:
    """Every existing object that would stand in the plan's way and is not this sandbox's own."""
    clashes = []
    for node in plan.nodes:
        try:
            container = client.containers.get(node.container)
            if _foreign(container.labels, plan.name):
                clashes.append(f"container {node.container} (not made by this sandbox)")
        except NotFound:
            pass
        try:
            volume = client.volumes.get(node.volume)
            if _foreign(volume.attrs.get("Labels"), plan.name):
                clashes.append(f"volume {node.volume} (not made by this sandbox)")
        except NotFound:
            pass
    for network in client.networks.list():
        mine = not _foreign(network.attrs.get("Labels"), plan.name)
        if network.name == plan.network and not mine:
            clashes.append(f"network {network.name} (not made by this sandbox)")
            continue
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []:
            subnet = config.get("Subnet")
            if (
                not mine
                and subnet
                and ":" not in subnet
                and ipaddress.IPv4Network(subnet, strict=False).overlaps(plan.subnet)
            ):
                clashes.append(f"network {network.name} uses {subnet}, overlapping {plan.subnet}")
    return clashes


def _ensure_network(client: docker.DockerClient, plan: SandboxPlan, undo: list[Callable[[], None]]) -> bool:
    """Create the sandbox's bridge network unless it exists; True when created."""
    try:
        client.networks.get(plan.network)
        return False
    except NotFound:
        pass
    ipam = docker.types.IPAMConfig(
        pool_configs=[
            docker.types.IPAMPool(subnet=str(plan.subnet), gateway=str(plan.subnet.network_address + 1))
        ]
    )
    network = client.networks.create(plan.network, driver="bridge", ipam=ipam, labels=plan.labels)
    undo.append(network.remove)
    return True


def _remove_container_and_volume(client: docker.DockerClient, container: Container) -> None:
    volumes = [m["Name"] for m in container.attrs.get("Mounts", []) if m.get("Type") == "volume"]
    container.remove(force=True)
    for volume in volumes:
        try:
            v = client.volumes.get(volume)
            if not _foreign(v.attrs.get("Labels"), container.labels.get(LABEL, "")):
                v.remove(force=True)
        except NotFound:
            pass


def _converge(
    client: docker.DockerClient,
    plan: SandboxPlan,
    files: SandboxFiles,
    undo: list[Callable[[], None]],
    log: Log,
    slurm: bool = False,
    light: bool = False,
) -> tuple[list[str], str | None, str, CpuPlan]:
    """Make the engine match ``plan`` (with ``slurm``: Slurm running on it; ``light``: nodes without an
    engine); return the changes made, the isolation mode used, the image and the benchmark containers'
    CPUs (the inventory's cpusets).

    Without Slurm a node container and its benchmark container have the same equal, disjoint share.
    With Slurm the node container has the GPU node shape's CPUs (``_plan_node_cpus``: Slurm binds the
    job's tasks among them), and the ssh launcher's benchmark containers keep the disjoint share, so a
    run through ssh measures what it measured before (on 2 CPUs: node1 on 0, node2 on 1).
    """
    changes: list[str] = []
    image = ensure_node_image(client, log, slurm=slurm)
    allowed = allowed_cpus(client, image, plan.labels)
    cpus = _plan_node_cpus(allowed, len(plan.nodes), slurm)
    # the benchmark containers' shares, out of the CPUs the node containers have (a nested cpuset must
    # stay within its parent's): with Slurm on 2 CPUs, node1 gets 0 and node2 1
    shares = plan_cpus(
        sorted({c for cpuset in cpus.cpusets for c in parse_cpu_list(cpuset)}), len(plan.nodes)
    )
    if shares.shared and light:
        log(
            f"{len(plan.nodes)} light nodes share {len(allowed)} CPU(s): a scale bed for fan-out, not for throughput"
        )
    elif shares.shared:
        log(
            f"warning: {len(plan.nodes)} nodes on fewer CPUs: nodes share CPUs (each on all of them), "
            "so a multi-node run's throughput measures contention, not scaling"
        )
    elif cpus.shared:
        log(
            f"the GPU-shaped Slurm nodes share CPUs (the same {sandbox_slurm.CPUS_PER_NODE} each, one per "
            "declared core); the benchmark containers `clusterctl up` starts keep one share each"
        )
    public_key = ensure_keypair(files.private_key, f"clusterctl-sandbox-{plan.name}")
    if _ensure_network(client, plan, undo):
        changes.append(f"created network {plan.network} ({plan.subnet})")
    shared = _ensure_shared_volume(client, plan, undo) if slurm else None
    python = None
    if light and slurm:  # the payload runs on the node itself: PyTorch from the wheelhouse, mounted
        python = (str(lightpython.ensure_installed(wheelhouse(), log)), lightpython.NODE_DIR)

    wanted = {n.container for n in plan.nodes}
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={plan.name}"}):
        if container.name not in wanted:
            log(f"removing {container.name} (beyond --nodes {len(plan.nodes)})")
            _remove_container_and_volume(client, container)
            changes.append(f"removed {container.name}")

    existing = {c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL}={plan.name}"})}
    isolation = None
    if any(node.container not in existing for node in plan.nodes):
        isolation = detect_isolation(client, image, plan.labels)
        log(f"node containers run in {isolation.mode} mode")

    def ensure(node: NodePlan, cpuset: str) -> tuple[Container, list[str]]:
        made: list[str] = []
        try:
            container = client.containers.get(node.container)
            new = False
        except NotFound:
            assert isolation is not None
            log(f"creating {node.container} ({node.address})")
            container = node_ops.create_node(
                client, plan, node, image, isolation, cpuset, shared, light=light, python=python
            )
            undo.append(functools.partial(_undo_node, client, container, node.volume))
            node_ops.authorise_key(container, public_key)
            new = True
            made.append(f"created {node.container}")
        if node_ops.node_cpuset(container) != cpuset:
            node_ops.set_cpuset(container, node, cpuset)
            made.append(f"moved {node.name} to CPUs {cpuset}")
        if container.status != "running":
            container.start()
            if not new:
                made.append(f"started {node.container}")
        return container, made

    # A few nodes at once: each is a handful of engine calls that mostly wait (128 light nodes one by one
    # took over 4 minutes on a loaded 2-core machine). A failure is raised once all have ended, so the
    # undo list holds every node made.
    with ThreadPoolExecutor(max_workers=CREATE_PARALLEL) as pool:
        outcomes = list(pool.map(ensure, plan.nodes, cpus.cpusets))
    started: list[tuple[NodePlan, Container]] = []
    for node, (container, made) in zip(plan.nodes, outcomes, strict=True):
        changes += made
        started.append((node, container))

    log(f"waiting for sshd{'' if light else ' and the Docker engine'} on {len(started)} node(s)")
    node_ops.wait_ready(started, engine=not light)
    for node, container in started:
        if node_ops.record_host_keys(files.known_hosts, node, node_ops.host_key_lines(container, node)):
            changes.append(f"recorded {node.name}'s host keys")
    if python:
        for _, container in started:
            lightpython.set_up_node(container)
    if slurm:
        changes += sandbox_slurm.start_slurm(
            plan, started, cpus, sandbox_slurm.munge_key(files.munge_key), log
        )
    return changes, isolation.mode if isolation else None, image, shares


def _plan_node_cpus(allowed: list[int], nodes: int, slurm: bool) -> CpuPlan:
    """The nodes' CPUs: equal disjoint shares, or with Slurm exactly the GPU node shape's CPUs each.

    Raises:
        EnvironmentProblem: Slurm's node shape needs more CPUs than the engine allows.
    """
    if not slurm:
        return plan_cpus(allowed, nodes)
    try:
        return plan_shaped_cpus(allowed, nodes, sandbox_slurm.CPUS_PER_NODE)
    except ValueError:
        raise EnvironmentProblem(
            f"sandbox up --slurm: each node declares {sandbox_slurm.SOCKETS} sockets of "
            f"{sandbox_slurm.CORES_PER_SOCKET} core, one real CPU per core ({sandbox_slurm.CPUS_PER_NODE} "
            f"CPUs), and the engine allows {len(allowed)}. Fix: run it on a machine (or a Docker engine) "
            f"with at least {sandbox_slurm.CPUS_PER_NODE} CPUs, or leave out --slurm."
        ) from None


def _ensure_shared_volume(
    client: docker.DockerClient, plan: SandboxPlan, undo: list[Callable[[], None]]
) -> tuple[str, str]:
    """The sandbox's shared volume (created, labelled, unless it exists) and where nodes mount it."""
    try:
        client.volumes.get(plan.shared_volume)
    except NotFound:
        volume = client.volumes.create(plan.shared_volume, labels=plan.labels)
        undo.append(lambda: volume.remove(force=True))
    return plan.shared_volume, sandbox_slurm.SHARED_DIR


def _undo_node(client: docker.DockerClient, container: Container, volume: str) -> None:
    container.remove(force=True)
    with contextlib.suppress(NotFound):
        client.volumes.get(volume).remove(force=True)


def up(
    name: str,
    nodes: int,
    subnet: str | None = None,
    log: Log = lambda _: None,
    *,
    slurm: bool = False,
    light: bool = False,
) -> SandboxStatus:
    """Bring the sandbox ``name`` to ``nodes`` running nodes; return its status with the changes made.

    With ``slurm`` the nodes also run Slurm (``clusterctl.sandbox.slurm``) and the inventory gets a
    slurm block. With ``light`` the nodes run no engine (a scale bed: sshd and, with ``slurm``, slurmd;
    the slurm block's runtime is then ``none``).

    Raises:
        InputError: bad name, node count or subnet, or another sandbox lives in this state directory.
        EnvironmentProblem: no engine, a clash with a foreign object, a node that would not start.
    """
    files = sandbox_files()
    existing = read_state(files)
    if existing and existing.name != name:
        raise InputError(
            f"the state directory {files.directory.parent} already holds sandbox {existing.name!r}. Fix: "
            f"run `clusterctl sandbox down` first, or set CLUSTERCTL_STATE_DIR to another directory."
        )
    if existing and subnet and subnet != existing.subnet:
        raise InputError(
            f"sandbox {name!r} runs on {existing.subnet}; it cannot move to --subnet {subnet}. Fix: omit "
            "--subnet, or `clusterctl sandbox down` first."
        )
    if existing and existing.slurm != slurm:
        have, want = ("with", "without") if existing.slurm else ("without", "with")
        raise InputError(
            f"sandbox {name!r} runs {have} Slurm; it cannot change to {want} in place (its nodes' image and "
            f"mounts differ). Fix: `clusterctl sandbox down` first, or {'add' if existing.slurm else 'drop'} --slurm."
        )
    if existing and existing.light != light:
        have, want = ("light", "full") if existing.light else ("full", "light")
        raise InputError(
            f"sandbox {name!r} runs {have} nodes; it cannot change to {want} nodes in place. Fix: "
            f"`clusterctl sandbox down` first, or {'add' if existing.light else 'drop'} --light."
        )
    plan = plan_sandbox(name, nodes, subnet or (existing.subnet if existing else DEFAULT_SUBNET), light=light)
    client = local_engine()
    clashes = find_clashes(client, plan)
    if clashes:
        raise EnvironmentProblem(
            f"sandbox {name!r} cannot be created: " + "; ".join(clashes) + ". Nothing was created. Fix: "
            "choose another --name (or --subnet for an overlapping network), or remove those objects if "
            "they are no longer used."
        )
    undo: list[Callable[[], None]] = []
    try:
        write_state(
            files, SandboxState(name=name, nodes=nodes, subnet=str(plan.subnet), slurm=slurm, light=light)
        )
        changes, isolation, image, cpus = _converge(client, plan, files, undo, log, slurm, light)
        inventory = write_inventory(plan, files, cpus, slurm=slurm, light=light)
        ca = ensure_tls(inventory).ca_cert.read_bytes()
        for node in plan.nodes:
            node_ops.trust_registry_ca(client.containers.get(node.container), inventory.registry_endpoint, ca)
        previous_isolation = existing.isolation if existing else None
        write_state(
            files,
            SandboxState(
                name=name,
                nodes=nodes,
                subnet=str(plan.subnet),
                node_image=image,
                isolation=isolation or previous_isolation,
                slurm=slurm,
                light=light,
            ),
        )
    except BaseException:
        for action in reversed(undo):
            with contextlib.suppress(docker.errors.DockerException):
                action()
        if existing is None:
            _remove_files(files)
        else:
            write_state(files, existing)
        raise
    result = status()
    result.changes = changes
    return result


def status() -> SandboxStatus:
    """The sandbox of this state directory as the local engine sees it now ("down" when there is none).

    Raises:
        EnvironmentProblem: no engine answers (only asked when a sandbox is recorded).
    """
    files = sandbox_files()
    state = read_state(files)
    if state is None:
        return SandboxStatus(name=None, state="down", files=files)
    plan = plan_sandbox(state.name, state.nodes, state.subnet, light=state.light)
    client = local_engine()
    node_states = []
    for node in plan.nodes:
        try:
            container = client.containers.get(node.container)
            container_state, cpus = container.status, node_ops.node_cpuset(container)
        except NotFound:
            container_state, cpus = "missing", ""
        node_states.append(
            NodeStatus(
                name=node.name,
                container=node.container,
                address=node.address,
                state=container_state,
                sshd=container_state == "running" and node_ops.sshd_answers(node.address),
                cpus=cpus,
            )
        )
    healthy = all(n.sshd for n in node_states) and files.inventory.is_file()
    return SandboxStatus(
        name=state.name,
        state="up" if healthy else "degraded",
        nodes=node_states,
        network=plan.network,
        subnet=str(plan.subnet),
        node_image=state.node_image,
        isolation=state.isolation,
        files=files,
        slurm=state.slurm,
        light=state.light,
    )


def _remove_files(files: SandboxFiles) -> None:
    for path in [*files.all(), *(p.with_suffix(".tmp") for p in files.all())]:
        path.unlink(missing_ok=True)
    if files.directory.is_dir() and not any(files.directory.iterdir()):
        files.directory.rmdir()


def down(name: str | None = None) -> list[str]:
    """Remove the sandbox ``name`` (default: the one recorded in this state directory); return what went.

    Removes every container, network and volume labelled ``io.clusterctl.sandbox=<name>``, then the
    sandbox's files and the per-cluster state other commands kept for it. Running it again removes
    nothing and succeeds.
    """
    files = sandbox_files()
    try:
        state = read_state(files)
    except EnvironmentProblem:
        if name is None:
            raise
        state = None
    name = name or (state.name if state else None)
    removed: list[str] = []
    if name is None:
        return removed
    client = local_engine()
    selector = {"label": f"{LABEL}={name}"}
    # An object already gone (another down, a removal by hand) is skipped, never an error that would
    # leave the network and volumes behind once the containers are gone.
    for container in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(NotFound):
            container.remove(force=True)
            removed.append(f"container {container.name}")
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(NotFound):
            network.remove()
            removed.append(f"network {network.name}")
    for volume in client.volumes.list(filters=selector):
        with contextlib.suppress(NotFound):
            volume.remove(force=True)
            removed.append(f"volume {volume.name}")
    if state is None or state.name == name:
        with contextlib.suppress(ClusterctlError, OSError):  # an unreadable inventory: nothing to undo
            if files.inventory.is_file() and untrust_on_controller(load_inventory(files.inventory)):
                removed.append("the registry's CA in /etc/docker/certs.d")
        if any(p.exists() for p in files.all()):
            removed.append(f"files in {files.directory}")
        _remove_files(files)
        cluster_dir = cluster_state_dir(name)
        if cluster_dir.is_dir():
            shutil.rmtree(cluster_dir)
            removed.append(f"cluster state {cluster_dir}")
        with contextlib.suppress(OSError):  # the clusters/ directory goes with its last cluster
            cluster_dir.parent.rmdir()
    return removed
