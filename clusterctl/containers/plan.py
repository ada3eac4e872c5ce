"""What ``up`` would start on a node, and how that compares with what runs there (all pure).

``container_spec`` turns the inventory into the whitepaper's ``docker run`` settings (GPUs, host
network, IPC_LOCK, data and benchmark mounts, localtime) with the admin-key mount replaced by the
cluster's own SSH material. ``spec_hash`` fingerprints everything a container is started from: the
container plan, the image ID on the node and the public half of the SSH files pushed for it.
``up`` records it in the ``SPEC_LABEL`` label, and ``decide`` compares it with a container found on
a node: keep it, replace it, or refuse (a running container that does not match: a benchmark may
still be running in it).

Before that, ``mount_probe`` asks each node, reading only, whether the sources of the inventory's
mounts exist: the docker API refuses a bind mount of a missing source, while ``docker run -v``
would create an empty directory there (shadowing, say, the image's ``/benchmarks``). ``up`` and
``up --dry-run`` both refuse such a node, naming it and the path, before anything starts.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any, TypedDict

from docker.types import DeviceRequest, Mount, Ulimit
from pydantic import BaseModel, Field

from clusterctl.hosts.cluster_keys import ClusterKeys, node_ssh_dir
from clusterctl.hosts.sshkeys import fingerprint, public_key_of
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Node

CLUSTER_LABEL = "io.clusterctl.cluster"
NODE_LABEL = "io.clusterctl.node"
ROLE_LABEL = "io.clusterctl.role"
# sha256 of what the container was started from (see spec_hash).
SPEC_LABEL = "io.clusterctl.spec"
# States in which a container holds live processes: replacing it would kill them.
LIVE_STATES = frozenset({"running", "paused", "restarting"})


# --------------------------------------------------------------------------- the spec


class BindMount(BaseModel):
    """A host path bind-mounted into the container."""

    source: str = Field(description="Path on the node.")
    target: str = Field(description="Path in the container.")
    read_only: bool = Field(description="Mounted read-only.")


class ContainerPlan(BaseModel):
    """Everything ``docker run`` needs for one node's benchmark container, derived from the inventory."""

    name: str = Field(description="clusterctl-<cluster>-<node>.")
    node: str = Field(description="The node it runs on.")
    image: str = Field(description="Image reference.")
    labels: dict[str, str] = Field(description="Labels that let down and status find exactly it.")
    network_mode: str = Field("host", description="Host network: MPI and NCCL see the node's interfaces.")
    cap_add: list[str] = Field(description="Capabilities: IPC_LOCK (pinned memory) and the inventory's.")
    privileged: bool = Field(description="Privileged only when the inventory asks.")
    gpus: bool = Field(description="All GPUs passed through (--gpus all).")
    devices: list[str] = Field(description="Device paths passed through (/dev/infiniband on RDMA).")
    memlock_unlimited: bool = Field(description="ulimit memlock -1 (RDMA registers pinned memory).")
    shm_size: str = Field(description="Size of /dev/shm.")
    mounts: list[BindMount] = Field(description="Data, benchmark, localtime and cluster SSH mounts.")
    cpuset: str | None = Field(None, description="CPUs the container may use (--cpuset-cpus); None: all.")


def container_name(inventory: Inventory, node: Node) -> str:
    """The benchmark container's name on ``node``."""
    return f"clusterctl-{inventory.cluster.name}-{node.name}"


def container_spec(inventory: Inventory, node: Node, image_ref: str) -> ContainerPlan:
    """The benchmark container of ``node``, from the inventory alone."""
    spec = inventory.container
    cap_add = list(dict.fromkeys(["IPC_LOCK", *spec.cap_add]))
    devices = list(dict.fromkeys([*(["/dev/infiniband"] if node.rdma else []), *spec.devices]))
    mounts = [BindMount(source=m.source, target=m.target, read_only=m.read_only) for m in spec.mounts]
    mounts += [
        BindMount(source="/etc/localtime", target="/etc/localtime", read_only=True),
        BindMount(source=node_ssh_dir(inventory), target=CONTAINER_SSH_DIR, read_only=True),
    ]
    return ContainerPlan(
        name=container_name(inventory, node),
        node=node.name,
        image=image_ref,
        labels={CLUSTER_LABEL: inventory.cluster.name, NODE_LABEL: node.name, ROLE_LABEL: node.role},
        cap_add=cap_add,
        privileged=spec.privileged,
        gpus=node.gpus.count > 0,
        devices=devices,
        memlock_unlimited=node.rdma,
        shm_size=spec.shm_size,
        mounts=mounts,
        cpuset=node.cpuset,
    )


def docker_run_kwargs(plan: ContainerPlan) -> dict[str, Any]:
    """``plan`` as keyword arguments of the docker SDK's ``containers.create``."""
    return {
        "image": plan.image,
        "name": plan.name,
        "labels": plan.labels,
        "network_mode": plan.network_mode,
        "cap_add": plan.cap_add,
        "privileged": plan.privileged,
        "device_requests": [DeviceRequest(count=-1, capabilities=[["gpu"]])] if plan.gpus else [],
        "devices": [f"{d}:{d}:rwm" for d in plan.devices],
        "ulimits": [Ulimit(name="memlock", soft=-1, hard=-1)] if plan.memlock_unlimited else [],
        "shm_size": plan.shm_size,
        "mounts": [Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in plan.mounts],
        "cpuset_cpus": plan.cpuset,
        "detach": True,
    }


def docker_run_argv(plan: ContainerPlan) -> list[str]:
    """The ``docker run`` command line equivalent to ``plan`` (for --dry-run and for people)."""
    return ["docker", "run", "-d", "--name", plan.name, *container_flags(plan), plan.image]


def container_flags(plan: ContainerPlan) -> list[str]:
    """``docker run``'s flags for ``plan`` between the name and the image (network, labels, devices...)."""
    argv = [f"--network={plan.network_mode}"]
    argv += [f"--label={k}={v}" for k, v in plan.labels.items()]
    argv += ["--gpus", "all"] if plan.gpus else []
    argv += [f"--cap-add={c}" for c in plan.cap_add]
    argv += [f"--device={d}" for d in plan.devices]
    argv += ["--ulimit", "memlock=-1:-1"] if plan.memlock_unlimited else []
    argv += [f"--shm-size={plan.shm_size}"]
    argv += [f"--cpuset-cpus={plan.cpuset}"] if plan.cpuset else []
    argv += [a for m in plan.mounts for a in ("-v", _volume_arg(m))]
    argv += ["--privileged"] if plan.privileged else []
    return argv


def _volume_arg(mount: BindMount) -> str:
    return f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"


# --------------------------------------------------------------------------- mount sources


def mount_sources(inventory: Inventory) -> list[str]:
    """The node paths the inventory's mounts bind (``up``'s own localtime and SSH mounts are not asked:
    the first is in every base system, the second ``up`` writes before it starts the container)."""
    return list(dict.fromkeys(m.source for m in inventory.container.mounts))


def mount_probe(paths: Sequence[str]) -> str:
    """A read-only shell command printing ``missing <path>`` for each of ``paths`` that does not exist.

    Example: ``mount_probe(["/srv/data"])`` prints ``missing /srv/data`` on a node without it, nothing
    on one with it; it exits 0 either way.
    """
    quoted = " ".join(shlex.quote(path) for path in paths)
    return f'for p in {quoted}; do [ -e "$p" ] || printf \'missing %s\\n\' "$p"; done'


def parse_mount_probe(output: str) -> list[str]:
    """The paths ``mount_probe``'s output reports missing, in order."""
    return [line.removeprefix("missing ") for line in output.splitlines() if line.startswith("missing ")]


def missing_mounts_message(missing: Mapping[str, Sequence[str]], inventory: Inventory) -> str:
    """Why ``up`` refused: each node and the mount sources it lacks, and the fix."""
    where = f" in {inventory.source}" if inventory.source else ""
    lines = [
        "up: mount sources are missing on "
        f"{', '.join(missing)}; nothing was started on any node (docker would refuse the bind mount; "
        "`docker run -v` would create an empty directory in their place)."
    ]
    lines += [f"  {node}: {', '.join(paths)}" for node, paths in missing.items()]
    lines.append(
        f"Fix: create them on those nodes (e.g. copy the data set or benchmarks there), or correct "
        f"container.mounts[].source{where}."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the spec hash


def ssh_material(keys: ClusterKeys, node: Node) -> dict[str, str]:
    """The public part of ``node``'s container SSH files: what the spec hash covers of them.

    The client key's public half (``authorized_keys``), the fingerprint of the node's host key and the
    cluster's ``known_hosts``; never a private key's bytes.
    """
    return {
        "authorized_keys": keys.client_key.with_name(keys.client_key.name + ".pub").read_text(),
        "host_key": fingerprint(public_key_of(keys.host_key(node))),
        "known_hosts": keys.known_hosts.read_text(),
    }


def spec_hash(plan: ContainerPlan, image_id: str, ssh: Mapping[str, str]) -> str:
    """sha256 over the container plan, the image ID and the SSH material, independent of key order."""
    document = {"plan": plan.model_dump(mode="json"), "image_id": image_id, "ssh": ssh}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


# --------------------------------------------------------------------------- keep, replace or refuse


class Action(StrEnum):
    """What ``up`` does with a node's container."""

    KEEP = "keep"
    REPLACE = "replace"
    CONFLICT = "conflict"


def decide(state: str | None, label: str | None, wanted: str, *, force_recreate: bool = False) -> Action:
    """Keep, replace or refuse, from the container's state (None: no container) and its spec label.

    Keep: running and started from ``wanted``. Replace: no container, one that is not live (created,
    exited, dead), or any container with ``force_recreate``. Conflict: live but not (running and
    matching): replacing it would kill what runs in it.
    """
    if state is None or force_recreate or state not in LIVE_STATES:
        return Action.REPLACE
    return Action.KEEP if state == "running" and label == wanted else Action.CONFLICT


def difference(container_image_id: str, label: str | None, image_id: str, wanted: str) -> str:
    """What differs between a container and what ``up`` would start now, in words ('' if nothing)."""
    if container_image_id != image_id:
        return "image differs"
    if label is None:
        return "no spec label (started by an older clusterctl)"
    return "settings differ" if label != wanted else ""


class DockerTop(TypedDict, total=False):
    """What ``docker top`` answers (the docker SDK's ``Container.top()``): ps's column titles and rows."""

    Titles: list[str]
    Processes: list[list[str]]


def user_processes(top: DockerTop) -> list[str]:
    """The distinct programs in ``docker top`` output besides the container's own sshd (the first five)."""
    titles = list(top.get("Titles") or [])
    if "CMD" not in titles:
        return []
    column = titles.index("CMD")
    names: list[str] = []
    for process in top.get("Processes") or []:
        argv = str(process[column]).split()
        name = PurePosixPath(argv[0]).name if argv else ""
        if name and not name.startswith("sshd") and name not in names:
            names.append(name)
    return names[:5]


@dataclass
class Found:
    """A node's container as ``up`` found it (``container_id`` None: none), and what ``up`` will do with it."""

    node: str
    action: Action
    wanted: str  # the spec hash a container started now gets as its SPEC_LABEL
    name: str
    container_id: str | None = None
    state: str | None = None
    differs: str = ""  # see difference()
    processes: list[str] | None = None  # see user_processes(); None: not asked, or no answer
    missing_mounts: list[str] = field(default_factory=list)  # mount sources not on the node

    @property
    def verb(self) -> str:
        """What ``up`` does with the node's container, in one word: kept, replaced or started."""
        if self.action is Action.KEEP:
            return "kept"
        return "replaced" if self.container_id else "started"

    def was(self) -> str:
        """The found container in words: state, what differs, what runs in it."""
        parts = [self.state or "unknown state", self.differs]
        if self.processes is not None:
            parts.append(f"running {', '.join(self.processes)}" if self.processes else "only sshd running")
        return "; ".join(p for p in parts if p)

    def summary(self) -> str:
        """What ``up`` does with the node's container, as a progress line."""
        if self.action is Action.KEEP:
            return f"kept {self.name} (running, spec unchanged)"
        return f"replaced {self.name} (was {self.was()})" if self.container_id else f"started {self.name}"


def plan_line(found: Found) -> str:
    """What ``up`` would do with ``found``'s node, as ``up --dry-run`` shows it."""
    if found.action is Action.KEEP:
        line = f"keep {found.name} (running, spec unchanged)"
    elif found.action is Action.CONFLICT:
        line = f"conflict: {found.name} is {found.was()}; up refuses unless --force-recreate"
    elif found.container_id:
        line = f"replace {found.name} (was {found.was()})"
    else:
        line = f"start {found.name}"
    if found.missing_mounts:
        line += f"; REFUSED: mount source missing: {', '.join(found.missing_mounts)}"
    return line


def conflict_message(conflicts: Sequence[Found]) -> str:
    """Why ``up`` refused: each conflicting node, what differs, what runs in it, and the fix."""
    lines = [
        f"up: refusing to replace live containers that differ from what up would start, on "
        f"{', '.join(f.node for f in conflicts)}; nothing was changed on any node."
    ]
    lines += [f"  {f.node}: {f.name} is {f.was()}" for f in conflicts]
    lines.append(
        "Fix: `clusterctl down` first (ends whatever runs in them), or `clusterctl up --force-recreate` "
        "to replace them now."
    )
    return "\n".join(lines)
