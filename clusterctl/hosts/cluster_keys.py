"""The cluster's own SSH material: what the benchmark containers' sshd and ssh client use.

Kept in ``<cluster state>/ssh/`` on the controller:

- ``id_ed25519`` (+ ``.pub``): the per-cluster client key mpirun uses between containers; its public
  half is every container's ``authorized_keys``.
- ``hostkeys/<node>/ssh_host_ed25519_key``: one container host key per node.
- ``known_hosts``: each node's container host key for ``[fabric_ip]:port``, ``[name]:port`` and
  ``[address]:port`` (appended to, never rewritten).

``up`` copies a node's files to ``/etc/clusterctl/<cluster>/ssh/`` on that node (0700, files 0600) and
bind-mounts that directory read-only at ``CONTAINER_SSH_DIR``. The admin's ``~/.ssh`` is never used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clusterctl.hosts.sshkeys import append_known_hosts, ensure_keypair, known_hosts_line
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import cluster_state_dir

HOST_KEY = "ssh_host_ed25519_key"
CLIENT_KEY = "id_ed25519"


@dataclass(frozen=True)
class ClusterKeys:
    """Paths of a cluster's SSH material on the controller."""

    directory: Path

    @property
    def client_key(self) -> Path:
        """The cluster's private client key."""
        return self.directory / CLIENT_KEY

    @property
    def known_hosts(self) -> Path:
        """known_hosts with every node's container host key."""
        return self.directory / "known_hosts"

    def host_key(self, node: Node) -> Path:
        """The private container host key of ``node``."""
        return self.directory / "hostkeys" / node.name / HOST_KEY


def container_host_names(node: Node) -> list[str]:
    """Every name a container of ``node`` is reached by: fabric IP, node name, management address."""
    return list(dict.fromkeys([node.fabric_ip, node.name, node.address]))


def ensure_cluster_keys(inventory: Inventory) -> ClusterKeys:
    """Create the cluster's client key, each node's host key and the known_hosts lines that are missing."""
    keys = ClusterKeys(cluster_state_dir(inventory.cluster.name) / "ssh")
    keys.directory.mkdir(parents=True, exist_ok=True)
    keys.directory.chmod(0o700)
    ensure_keypair(keys.client_key, f"clusterctl-{inventory.cluster.name}")
    lines = []
    for node in inventory.nodes:
        public = ensure_keypair(keys.host_key(node), f"clusterctl-{inventory.cluster.name}-{node.name}")
        lines.append(known_hosts_line(container_host_names(node), inventory.container.sshd_port, public))
    append_known_hosts(keys.known_hosts, lines)
    return keys


def node_ssh_dir(inventory: Inventory) -> str:
    """The directory on every node that holds its container's SSH files (mounted at CONTAINER_SSH_DIR)."""
    return f"/etc/clusterctl/{inventory.cluster.name}/ssh"


def node_ssh_files(keys: ClusterKeys, node: Node) -> dict[str, bytes]:
    """The files of ``node``'s container SSH directory, by name, as CONTAINER_SSH_DIR expects them."""
    client_public = keys.client_key.with_name(CLIENT_KEY + ".pub").read_bytes()
    return {
        "authorized_keys": client_public,
        HOST_KEY: keys.host_key(node).read_bytes(),
        CLIENT_KEY: keys.client_key.read_bytes(),
        "known_hosts": keys.known_hosts.read_bytes(),
    }
