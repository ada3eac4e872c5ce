"""Integration fixtures: a real Docker engine, and a 2-node sandbox shared by the whole session.

``sandbox2`` brings up one sandbox for every integration test that asks for it (provision, image,
up, run, check) and removes it at the end of the session. Its state directory is private to the
session, and ``CLUSTERCTL_STATE_DIR`` points there for the whole session, so commands run without
``-i`` use its inventory. Its name and subnet are picked per session, so concurrent sessions on one
engine do not collide. ``cluster`` is its inventory with the image built and delivered; no
benchmark container is left after the test. The sandbox's class and what tests do on it are in
``tests/helpers/sandbox.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
from docker.errors import DockerException

from clusterctl.containers import lifecycle
from clusterctl.image.build import build_image
from clusterctl.image.distribute import distribute
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import Sandbox, private_sandbox


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
