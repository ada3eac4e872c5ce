"""What ``up`` starts on a node: the benchmark container's spec, from the inventory alone (pure).

``container_spec`` turns the inventory into the whitepaper's ``docker run`` settings (GPUs, host
network, IPC_LOCK, data and benchmark mounts, localtime) with the admin-key mount replaced by the
cluster's own SSH material.
"""

from __future__ import annotations

from docker.types import DeviceRequest, Mount, Ulimit
from pydantic import BaseModel, Field

from clusterctl.cluster_keys import node_ssh_dir
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory, Node

CLUSTER_LABEL = "io.clusterctl.cluster"
NODE_LABEL = "io.clusterctl.node"
ROLE_LABEL = "io.clusterctl.role"


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
    )


def docker_run_kwargs(plan: ContainerPlan) -> dict[str, object]:
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
        "detach": True,
    }


def docker_run_argv(plan: ContainerPlan) -> list[str]:
    """The ``docker run`` command line equivalent to ``plan`` (for --dry-run and for people)."""
    argv = ["docker", "run", "-d", "--name", plan.name, f"--network={plan.network_mode}"]
    argv += [f"--label={k}={v}" for k, v in plan.labels.items()]
    argv += ["--gpus", "all"] if plan.gpus else []
    argv += [f"--cap-add={c}" for c in plan.cap_add]
    argv += [f"--device={d}" for d in plan.devices]
    argv += ["--ulimit", "memlock=-1:-1"] if plan.memlock_unlimited else []
    argv += [f"--shm-size={plan.shm_size}"]
    argv += [a for m in plan.mounts for a in ("-v", _volume_arg(m))]
    argv += ["--privileged"] if plan.privileged else []
    return [*argv, plan.image]


def _volume_arg(mount: BindMount) -> str:
    return f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"
