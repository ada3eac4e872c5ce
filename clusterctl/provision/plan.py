"""What ``provision`` renders, offline: the facts every step template sees, the files steps may upload,
and every step rendered per node (``provision --plan``).

No node is contacted here; the cluster's SSH keys and, with a registry, its CA are created on this
machine when missing (the steps install them).
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.diagnostics.nccl_gdr import FIRST_DMABUF_KERNEL, dmabuf_path
from clusterctl.diagnostics.parsers.modinfo import OPEN_LICENSE
from clusterctl.hosts.cluster_keys import ensure_cluster_keys
from clusterctl.hosts.sftp import Source
from clusterctl.hosts.sshkeys import known_hosts_line
from clusterctl.image.registry import certs_d_path, ensure_tls
from clusterctl.inventory import Inventory
from clusterctl.paths import data_dir
from clusterctl.provision.playbook import (
    RenderedStep,
    load_playbook,
    nodes_in_limit,
    render_step,
    select_steps,
)
from clusterctl.versions import version_tuple

StepFile = Source
"""What a step may upload: bytes (a small file such as a key) or a controller file, streamed from disk."""


def hosts_lines(inventory: Inventory) -> list[str]:
    """The ``/etc/hosts`` lines of the cluster: ``<fabric IPv4> <node name>`` per node whose fabric address
    (or, without one, management address) is an IPv4 address. A node reached by a DNS name and without a
    fabric address gets no line: /etc/hosts maps addresses to names, and ``gpu01.example.org node1`` would
    be a line that names no address."""
    return [f"{n.fabric_ip} {n.name}" for n in inventory.nodes if _is_ipv4(n.fabric_ip)]


def _is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def step_context(inventory: Inventory, host_keys: dict[str, str]) -> dict[str, Any]:
    """What step templates see besides ``node``: the inventory and facts about the whole cluster.

    ``host_keys`` maps node name to its SSH host public key ("TYPE BASE64") as verified on connect.
    """
    name = inventory.cluster.name
    key_path = f"/root/.ssh/clusterctl-{name}"
    names = [n for node in inventory.nodes for n in dict.fromkeys([node.name, node.fabric_ip, node.address])]
    return {
        "inv": inventory,
        "cluster": {
            "name": name,
            "hosts_lines": hosts_lines(inventory),
            "known_hosts_lines": [
                known_hosts_line(dict.fromkeys([n.name, n.fabric_ip, n.address]), 22, host_keys[n.name])
                for n in inventory.nodes
                if n.name in host_keys
            ],
            "key_path": key_path,
            "ssh_config": f"Host {' '.join(names)}\n    IdentityFile {key_path}\n    IdentitiesOnly yes\n",
            "public_key": ensure_cluster_keys(inventory).client_key.with_suffix(".pub").read_text().strip(),
            "peermem": peer_memory_module(inventory),
            **_dmabuf_context(inventory),
            **_registry_context(inventory),
        },
    }


# CUDA 11.4 came with driver R470, the first to ship nvidia-peermem.
PEERMEM_IN_DRIVER_SINCE_CUDA = (11, 4)


def peer_memory_module(inventory: Inventory) -> str:
    """The GPUDirect RDMA peer-memory module for the hosts' driver generation, which the image's CUDA stands
    for: ``nv_peer_mem`` (Mellanox's, built from source) before R470, else the driver's ``nvidia_peermem``."""
    cuda = version_tuple(inventory.image.versions.cuda)
    return "nv_peer_mem" if cuda is not None and cuda < PEERMEM_IN_DRIVER_SINCE_CUDA else "nvidia_peermem"


def _dmabuf_context(inventory: Inventory) -> dict[str, Any]:
    """What the gpudirect-rdma step needs to pass GPUDirect through DMA-BUF by the rule `check topology`
    applies (``dmabuf_path``): whether the image's NCCL has DMA-BUF, and the license and kernel it needs."""
    nccl_ok = (
        dmabuf_path(open_modules=None, kernel=None, nccl=inventory.image.versions.nccl).usable is not False
    )
    return {
        "dmabuf_nccl": nccl_ok,
        "dmabuf_license": OPEN_LICENSE,
        "dmabuf_kernel": ".".join(map(str, FIRST_DMABUF_KERNEL)),
    }


def _registry_context(inventory: Inventory) -> dict[str, str]:
    """Where the registry-ca step puts the cluster registry's CA, and its SHA-256 (none without a registry)."""
    if inventory.registry_address is None:
        return {}
    ca = ensure_tls(inventory).ca_cert.read_bytes()
    return {
        "registry_ca_path": str(certs_d_path(inventory.registry_endpoint)),
        "registry_ca_sha256": hashlib.sha256(ca).hexdigest(),
    }


def step_files(inventory: Inventory) -> dict[str, StepFile]:
    """Files steps may upload, by the name their ``upload.source`` uses. Never logged.

    ``cluster_key``: the cluster's private key. ``registry_ca``: the cluster registry's CA certificate,
    when the inventory names a registry. ``mofed_tarball``: ``provision.mofed_tarball_path``,
    present only when set, as a path (read from disk in chunks while it is uploaded).
    """
    keys = ensure_cluster_keys(inventory)
    files: dict[str, StepFile] = {"cluster_key": keys.client_key.read_bytes()}
    if inventory.provision.mofed_tarball_path:
        files["mofed_tarball"] = inventory.provision.mofed_tarball_path
    if inventory.registry_address is not None:
        files["registry_ca"] = ensure_tls(inventory).ca_cert.read_bytes()
    return files


@dataclass(frozen=True)
class NodePlan:
    """Every step of a playbook rendered for one node, as ``provision`` would run it (``--plan``)."""

    node: str
    steps: list[RenderedStep]

    def to_json(self) -> dict[str, Any]:
        """The node's steps as plain data: a skip reason, or the check, apply, verify and uploads."""
        return {
            "node": self.node,
            "steps": [
                {"step": r.step.name, "skipped": r.skip_reason}
                if r.skip_reason
                else {
                    "step": r.step.name,
                    "check": r.check,
                    "apply": r.apply,
                    "verify": r.verify,
                    "uploads": [{"source": s, "dest": d, "mode": oct(m)} for s, d, m in r.uploads],
                }
                for r in self.steps
            ],
        }


def plan_provision(
    inventory: Inventory,
    *,
    playbook_path: Path | None = None,
    step_names: Sequence[str] = (),
    limit: str | None = None,
) -> list[NodePlan]:
    """Every step's commands rendered per node, without connecting to any (`provision --plan`).

    What a real run would do where each ``check`` fails; the nodes' host keys are not known offline,
    so the cluster-ssh step's known_hosts lines are the ones a run learns on connect (left out here).

    Raises:
        InputError: a bad playbook, step name or ``--limit``.
    """
    playbook = load_playbook(playbook_path or data_dir("playbooks") / "host-setup.yml")
    steps = select_steps(playbook, list(step_names))
    context = step_context(inventory, {})
    return [NodePlan(node.name, [render_step(step, node, context) for step in steps])
            for node in nodes_in_limit(inventory, limit)]  # fmt: skip
