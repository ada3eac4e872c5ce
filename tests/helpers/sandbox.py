"""The sandbox in a test: a scratch sandbox with its own state directory (``private_sandbox``), what it
is (``Sandbox``), and what tests do on it: run a command in a node's container, list or remove what a
test left on the nodes' engines. ``tests/integration/conftest.py`` builds the session's sandbox fixtures
on these."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from docker.errors import DockerException

from clusterctl.containers.plan import CLUSTER_LABEL
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.sandbox import engine as sandbox_engine
from clusterctl.sandbox.scratch import scratch_sandbox


def free_subnet() -> str:
    """A 10.213.X.0/24 that no network on the local engine overlaps (X from 100 to 249)."""
    return sandbox_engine.free_subnet(docker.from_env(timeout=30))


@dataclass(frozen=True)
class Sandbox:
    """A running sandbox: its name, state directory and generated inventory (path and model)."""

    name: str
    state_dir: Path
    inventory_path: Path
    inventory: Inventory


@contextlib.contextmanager
def private_sandbox(
    tmp_path_factory: pytest.TempPathFactory,
    prefix: str,
    nodes: int,
    *,
    slurm: bool = False,
    light: bool = False,
) -> Iterator[Sandbox]:
    """A scratch sandbox of ``nodes`` nodes with its own state directory (CLUSTERCTL_STATE_DIR points
    there while it is up); removed on the way out."""
    state = tmp_path_factory.mktemp(f"{prefix}-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLUSTERCTL_STATE_DIR", str(state))
        mp.delenv("CLUSTERCTL_INVENTORY", raising=False)
        with scratch_sandbox(prefix, nodes, slurm=slurm, light=light) as result:
            assert result.name is not None
            path = result.files.inventory
            yield Sandbox(
                name=result.name, state_dir=state, inventory_path=path, inventory=load_inventory(path)
            )


def benchmark_containers(inv: Inventory) -> dict[str, list[tuple[str, str]]]:
    """Per node: (ID, state) of each container of ``inv``'s cluster on the node's engine."""
    found = {}
    for node in inv.nodes:
        client = docker_client(inv, node)
        try:
            labelled = client.containers.list(
                all=True, filters={"label": f"{CLUSTER_LABEL}={inv.cluster.name}"}
            )
            found[node.name] = [(c.id, c.status) for c in labelled]
        finally:
            client.close()
    return found


def remove_from_nodes(inv: Inventory, image_id: str) -> None:
    """Remove the image ``image_id`` from every node's engine, where it is (a test's own image)."""
    for node in inv.nodes:
        with (
            contextlib.closing(docker_client(inv, node)) as client,
            contextlib.suppress(DockerException),
        ):
            client.images.remove(image_id, force=True)


def on_node(sandbox: Sandbox, node: str, *argv: str, check: bool = True) -> str:
    """Run ``argv`` in the sandbox's node container (the node's console, through the local engine); its
    stdout. Processes of the node's benchmark containers are visible there too."""
    done = subprocess.run(
        ["docker", "exec", f"clusterctl-{sandbox.name}-{node}", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )
    return done.stdout
