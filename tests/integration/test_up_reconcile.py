"""A second `up` reconciles on the 2-node sandbox: it keeps running containers that match, refuses
(changing nothing) to replace running ones that do not unless forced, and replaces stopped ones."""

from __future__ import annotations

import time

import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.containers.plan import user_processes
from clusterctl.hosts.cluster_keys import node_ssh_dir
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import connect, run
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import benchmark_containers

pytestmark = pytest.mark.integration


def _ssh_dir_stat(inv: Inventory) -> dict[str, str]:
    """Per node: name, size, inode and mtime (ns) of each file in its container SSH directory."""
    found = {}
    for node in inv.nodes:
        with connect(inv, node) as conn:
            result = run(conn, node, f"stat -c '%n %s %i %y' {node_ssh_dir(inv)}/*", timeout_s=30)
        assert result.ok, result
        found[node.name] = result.stdout
    return found


def _primary_programs(inv: Inventory, container_id: str) -> list[str]:
    """What runs in the primary's container besides sshd (docker top)."""
    client = docker_client(inv, inv.primary)
    try:
        return user_processes(client.containers.get(container_id).top())
    finally:
        client.close()


def _start_long_process(inv: Inventory, container_id: str) -> None:
    """Run a long python3 in the primary's container, as a benchmark would; wait until top shows it."""
    client = docker_client(inv, inv.primary)
    try:
        client.containers.get(container_id).exec_run(
            ["python3", "-c", "import time; time.sleep(600)"], detach=True
        )
    finally:
        client.close()
    deadline = time.monotonic() + 10
    while "python3" not in _primary_programs(inv, container_id):
        assert time.monotonic() < deadline, "python3 never showed in docker top"
        time.sleep(0.2)


def _shm_size(inv: Inventory, container_id: str) -> int:
    client = docker_client(inv, inv.primary)
    try:
        return client.containers.get(container_id).attrs["HostConfig"]["ShmSize"]
    finally:
        client.close()


def test_second_up_is_a_no_op(cluster: Inventory, sandbox2, capsys: pytest.CaptureFixture[str]) -> None:
    first = lifecycle.up(cluster, effective_image_ref(cluster), ready_timeout_s=60)
    assert {o.action for o in first.values()} == {"started"}
    before, files = benchmark_containers(cluster), _ssh_dir_stat(cluster)
    assert all(state == "running" for found in before.values() for _, state in found)
    capsys.readouterr()

    assert main(["up", "-i", str(sandbox2.inventory_path), "--timeout", "60"]) == 0
    captured = capsys.readouterr()
    assert "up: unchanged" in captured.out
    for node in cluster.nodes:
        assert f"{node.name}: kept clusterctl-" in captured.err
    assert benchmark_containers(cluster) == before  # same IDs, still running
    assert _ssh_dir_stat(cluster) == files  # not even the SSH files were rewritten


def test_running_container_that_differs_is_refused_unless_forced(
    cluster: Inventory, sandbox2, capsys: pytest.CaptureFixture[str]
) -> None:
    image_ref = effective_image_ref(cluster)
    lifecycle.up(cluster, image_ref, ready_timeout_s=60)
    before, files = benchmark_containers(cluster), _ssh_dir_stat(cluster)
    primary_id = before[cluster.primary.name][0][0]
    _start_long_process(cluster, primary_id)
    changed = cluster.model_copy(
        update={"container": cluster.container.model_copy(update={"shm_size": "256m"})}
    )

    with pytest.raises(lifecycle.UpConflict) as refused:
        lifecycle.up(changed, image_ref, ready_timeout_s=60)
    message = str(refused.value)
    for node in cluster.nodes:
        assert (
            f"{node.name}: clusterctl-{cluster.cluster.name}-{node.name} is running; settings differ"
            in message
        )
    assert "running python3" in message  # the primary's benchmark stand-in
    assert "clusterctl down" in message and "clusterctl up --force-recreate" in message
    assert benchmark_containers(cluster) == before
    assert _ssh_dir_stat(cluster) == files
    assert _primary_programs(cluster, primary_id) == ["python3"]  # the benchmark was not touched

    forced = lifecycle.up(changed, image_ref, ready_timeout_s=60, force_recreate=True)
    assert {o.action for o in forced.values()} == {"replaced"}
    after = benchmark_containers(cluster)
    for node in cluster.nodes:
        ((new_id, state),) = after[node.name]
        assert new_id != before[node.name][0][0] and state == "running"
    assert _shm_size(cluster, after[cluster.primary.name][0][0]) == 256 * 1024 * 1024

    # The sandbox's inventory file still says 1g: the CLI refuses with exit 1 and changes nothing.
    capsys.readouterr()
    assert main(["up", "-i", str(sandbox2.inventory_path), "--timeout", "60"]) == 1
    assert "--force-recreate" in capsys.readouterr().err
    assert benchmark_containers(cluster) == after


def test_exited_container_is_replaced_without_force(cluster: Inventory) -> None:
    image_ref = effective_image_ref(cluster)
    lifecycle.up(cluster, image_ref, ready_timeout_s=60)
    before = benchmark_containers(cluster)
    stopped, running = cluster.secondaries[0], cluster.primary
    client = docker_client(cluster, stopped)
    client.containers.get(before[stopped.name][0][0]).stop(timeout=2)
    client.close()

    events: list[tuple[str, str]] = []
    outcomes = lifecycle.up(
        cluster, image_ref, ready_timeout_s=60, on_event=lambda node, msg: events.append((node, msg))
    )
    assert outcomes[stopped.name].action == "replaced" and outcomes[running.name].action == "kept"
    after = benchmark_containers(cluster)
    assert after[running.name] == before[running.name]
    ((new_id, state),) = after[stopped.name]
    assert new_id != before[stopped.name][0][0] and state == "running"
    replaced = f"replaced clusterctl-{cluster.cluster.name}-{stopped.name} (was exited)"
    assert any(node == stopped.name and msg.startswith(replaced) for node, msg in events), events
