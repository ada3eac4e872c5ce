"""Image build, delivery and the container lifecycle on the 2-node sandbox (cpu profile), real parts only:
the local engine builds, each node's engine loads over SSH, the containers' sshd and Open MPI run for real.

Uses the fixture ``cluster`` (tests/integration/conftest.py): the session sandbox's inventory with
the image built and delivered, containers removed after each test.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from clusterctl.containers import lifecycle
from clusterctl.containers.plan import container_name
from clusterctl.errors import StepError
from clusterctl.hosts import container_exec
from clusterctl.hosts.docker_remote import DOCKER_CALL_TIMEOUT_S, docker_client
from clusterctl.image.distribute import distribute
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory, Node
from tests.helpers.sandbox import benchmark_containers

pytestmark = pytest.mark.integration

# Holds the container sshd port on every address family, so the container's sshd cannot bind it.
# SO_REUSEADDR (as sshd sets it): connections of an earlier test's sshd may linger in TIME_WAIT on
# the port, and without it bind fails then; it never lets a second socket listen on the port.
_SQUATTER = """
import socket, time
try:
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", PORT))
except OSError:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", PORT))
s.listen()
print("bound", flush=True)
time.sleep(300)
"""


def _wait_for_log_line(container, line: str, timeout_s: float) -> None:
    """Wait (bounded) until ``container`` has printed ``line``; the squatter must hold the port before up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if line in container.logs().decode(errors="replace").split():
            return
        container.reload()
        if container.status == "exited":
            break
        time.sleep(0.2)
    raise AssertionError(f"{container.name} never printed {line!r}: {container.logs()!r}")


def test_second_delivery_moves_nothing(cluster: Inventory) -> None:
    image_id, results = distribute(cluster)
    assert {r.status for r in results.values()} == {"skipped"}
    assert sum(r.bytes_sent for r in results.values()) == 0
    assert all(r.image_id == image_id for r in results.values())


def test_up_ssh_between_containers_mpirun_then_down(cluster: Inventory) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    statuses = lifecycle.status(cluster, effective_image_ref(cluster))
    assert all(s.ok for s in statuses.values()), statuses

    secondary = cluster.secondaries[0]
    lines: list[str] = []
    # The container's ssh_config enforces StrictHostKeyChecking yes; say it again to be explicit.
    code = container_exec.exec_in_container(
        cluster,
        cluster.primary,
        [
            "ssh",
            "-o",
            "StrictHostKeyChecking=yes",
            "-p",
            str(cluster.container.sshd_port),
            secondary.name,
            "hostname",
        ],
        container=container_name(cluster, cluster.primary),
        env=None,
        timeout_s=60,
        on_line=lines.append,
    )
    assert code == 0 and lines == [secondary.name]

    lines.clear()
    hosts = ",".join(f"{n.fabric_ip}:1" for n in cluster.nodes)
    code = container_exec.exec_in_container(
        cluster,
        cluster.primary,
        ["mpirun", "--allow-run-as-root", "-np", str(len(cluster.nodes)), "-H", hosts, "hostname"],
        container=container_name(cluster, cluster.primary),
        env=None,
        timeout_s=120,
        on_line=lines.append,
    )
    assert code == 0 and sorted(lines) == sorted(n.name for n in cluster.nodes)

    lifecycle.down(cluster)
    assert benchmark_containers(cluster) == {n.name: [] for n in cluster.nodes}


def test_exec_timeout_kills_the_command(cluster: Inventory) -> None:
    lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    primary = container_name(cluster, cluster.primary)
    start = time.monotonic()
    with pytest.raises(container_exec.ExecTimedOut, match="ran past 2 s"):
        container_exec.exec_in_container(
            cluster,
            cluster.primary,
            ["sleep", "300"],
            container=primary,
            env=None,
            timeout_s=2,
            on_line=lambda _: None,
        )
    assert time.monotonic() - start < 20
    lines: list[str] = []
    container_exec.exec_in_container(
        cluster,
        cluster.primary,
        ["ps", "-eo", "comm="],
        container=primary,
        env=None,
        timeout_s=30,
        on_line=lines.append,
    )
    assert "sleep" not in lines


@contextlib.contextmanager
def _port_squatter(inv: Inventory, node: Node) -> Iterator[None]:
    """Hold the container sshd port on ``node`` while inside, so a new container's sshd cannot start."""
    client = docker_client(inv, node)
    squatter = client.containers.run(
        effective_image_ref(inv),
        ["python3", "-c", _SQUATTER.replace("PORT", str(inv.container.sshd_port))],
        network_mode="host",
        detach=True,
        name="clusterctl-test-port-squatter",
    )
    try:
        _wait_for_log_line(squatter, "bound", timeout_s=30)
        yield
    finally:
        squatter.remove(force=True)
        client.close()


def test_secondary_whose_sshd_cannot_start_fails_up_and_leaves_nothing(cluster: Inventory) -> None:
    broken = cluster.secondaries[0]
    deadline_s = 20
    with _port_squatter(cluster, broken):
        start = time.monotonic()
        with pytest.raises(StepError) as exc:
            lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=deadline_s)
        assert time.monotonic() - start < deadline_s + DOCKER_CALL_TIMEOUT_S / 6
        assert f"not ready on {broken.name}:" in str(exc.value)  # names exactly that host
        assert benchmark_containers(cluster) == {n.name: [] for n in cluster.nodes}


def test_failed_up_removes_what_it_started_but_not_what_it_kept(cluster: Inventory) -> None:
    image_ref = effective_image_ref(cluster)
    lifecycle.up(cluster, image_ref, ready_timeout_s=60)
    before = benchmark_containers(cluster)
    # The secondary is kept (and gated); the primary, exited, is replaced and cannot start.
    broken, kept = cluster.primary, cluster.secondaries[0]
    client = docker_client(cluster, broken)
    client.containers.get(before[broken.name][0][0]).stop(timeout=2)
    client.close()
    with _port_squatter(cluster, broken), pytest.raises(StepError, match=f"not ready on {broken.name}:"):
        lifecycle.up(cluster, image_ref, ready_timeout_s=20)
    assert benchmark_containers(cluster) == {broken.name: [], kept.name: before[kept.name]}
