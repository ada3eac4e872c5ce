"""Integration fixtures: a real Docker engine, and a 2-node sandbox shared by the whole session.

``sandbox2`` brings up one sandbox for every integration test that asks for it (provision, image,
up, run, check) and removes it at the end of the session. Its state directory is private to the
session, and ``CLUSTERCTL_STATE_DIR`` points there for the whole session, so commands run without
``-i`` use its inventory. Its name and subnet are picked per session, so concurrent sessions on one
engine do not collide. ``cluster`` is its inventory with the image built and delivered; no
benchmark container is left after the test.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from docker.errors import DockerException

from clusterctl.containers import lifecycle
from clusterctl.containers.plan import CLUSTER_LABEL
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.image.build import build_image
from clusterctl.image.distribute import distribute
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.sandbox import engine as sandbox_engine
from clusterctl.sandbox.scratch import scratch_sandbox


def _engine() -> docker.DockerClient | None:
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except DockerException:
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip integration tests, with the reason, when no Docker engine answers (CI always has one)."""
    integration = [item for item in items if item.get_closest_marker("integration")]
    if integration and _engine() is None:
        skip = pytest.mark.skip(
            reason="no Docker engine answers (DOCKER_HOST or /var/run/docker.sock); run scripts/setup-env.sh"
        )
        for item in integration:
            item.add_marker(skip)


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


@pytest.fixture(scope="session")
def sandbox2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A 2-node sandbox with Slurm, up for the whole session; CLUSTERCTL_STATE_DIR points at its state."""
    # With Slurm (munge, slurmctld, slurmd: a few MB each), so the slurm launcher's tests share
    # this sandbox and its delivered image; its inventory keeps ssh as the default launcher.
    with private_sandbox(tmp_path_factory, "it2", 2, slurm=True) as sandbox:
        yield sandbox


@pytest.fixture
def cluster(sandbox2: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inventory]:
    """The sandbox's inventory with its image built and delivered; containers removed afterwards."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(sandbox2.state_dir))
    inv = sandbox2.inventory
    build_image(inv)
    distribute(inv)
    yield inv
    lifecycle.down(inv)


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
