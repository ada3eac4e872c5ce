"""The cluster registry on a node (``delivery.registry.node``): the inventory's rules, the endpoint it
gives, the provision steps it turns on, and the start and stop commands run in a real shell with the
real ``docker-registry`` (what ``registry_node`` sends over SSH; the sandbox test runs them on a node)."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509

from clusterctl.errors import EnvironmentProblem, InventoryError
from clusterctl.image import registry_node
from clusterctl.image.registry import ensure_tls, registry_config, wait_until_answers
from clusterctl.inventory import Inventory, validate_document
from clusterctl.paths import data_dir
from clusterctl.provision.playbook import load_playbook, render_step, select_steps

NODES = [
    {"name": "node1", "address": "10.0.0.11", "role": "primary", "fabric": {"address": "192.168.1.1/24"}},
    {"name": "node2", "address": "10.0.0.12", "fabric": {"address": "192.168.1.2/24"}},
]


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))


def _inventory(registry: dict, transport: str = "registry", nodes: list | None = None) -> Inventory:
    document = {
        "cluster": {"name": "regnode-test"},
        "nodes": nodes or NODES,
        "delivery": {"transport": transport, "registry": registry},
    }
    return validate_document(document, Path("inventory.yml"))


def test_a_named_node_runs_the_registry_at_its_management_address() -> None:
    inv = _inventory({"node": "node2", "port": 5999})
    assert inv.registry_node is inv.nodes[1]
    # The management address, not the fabric one: the controller's engine pushes there too.
    assert inv.registry_address == "10.0.0.12"
    assert inv.registry_endpoint == "10.0.0.12:5999"
    controller = _inventory({"address": "10.0.0.1"})
    assert controller.registry_node is None and controller.registry_endpoint == "10.0.0.1:5443"
    assert _inventory({}, "stream").registry_address is None


@pytest.mark.parametrize(
    ("registry", "field", "fix"),
    [
        ({"node": "node9"}, "delivery.registry.node", "name the node that runs the registry"),
        ({"node": "node1", "address": "10.0.0.1"}, "delivery.registry", "keep address to run the registry"),
        ({}, "delivery", "set address to the controller's address"),
        ({"node": "Node 1"}, "delivery.registry.node", "use only the characters"),
        ({"node": "node1", "host": "x"}, "delivery.registry.host", "remove the key"),
    ],
)
def test_bad_registry_placement_is_one_clear_error(registry: dict, field: str, fix: str) -> None:
    with pytest.raises(InventoryError) as caught:
        _inventory(registry)
    message = str(caught.value)
    assert message.startswith("inventory.yml"), message
    assert f"field {field}:" in message and f"Fix: {fix}" in message, message


def test_an_unknown_node_is_refused_even_with_the_stream_transport() -> None:
    with pytest.raises(
        InventoryError, match=r"'node9' is not a node of this inventory \(nodes: node1, node2\)"
    ):
        _inventory({"node": "node9"}, "stream")


def test_the_server_certificate_names_the_registry_nodes_address() -> None:
    files = ensure_tls(_inventory({"node": "node2"}))
    names = (
        x509.load_pem_x509_certificate(files.server_cert.read_bytes())
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.12")]


def test_provision_installs_the_server_on_the_registry_node_only_and_the_ca_for_its_endpoint() -> None:
    from clusterctl.provision.plan import step_context

    inv = _inventory({"node": "node2"})
    context = step_context(inv, {})
    (server, ca) = select_steps(
        load_playbook(data_dir("playbooks") / "host-setup.yml"), ["registry-server", "registry-ca"]
    )
    on_node1, on_node2 = (render_step(server, node, context) for node in inv.nodes)
    assert on_node1.skip_reason and "delivery.registry.node" in on_node1.skip_reason
    assert not on_node2.skip_reason
    assert "apt-get install" in on_node2.apply and "docker-registry" in on_node2.apply
    assert "systemctl disable --now docker-registry" in on_node2.apply  # the package's own service
    for node in inv.nodes:
        rendered = render_step(ca, node, context)
        assert rendered.uploads == (("registry_ca", "/etc/docker/certs.d/10.0.0.12:5443/ca.crt", 0o644),)
    controller = _inventory({"address": "10.0.0.1"})
    assert all(render_step(server, n, step_context(controller, {})).skip_reason for n in controller.nodes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(group: str) -> bool:
    """Whether a process of the group is still alive (not a zombie: PID 1 here may reap late)."""
    found = subprocess.run(["ps", "-o", "stat=", "-g", group], capture_output=True, text=True).stdout
    return any(not stat.startswith("Z") for stat in found.split())


def _local_registry(tmp_path: Path) -> tuple[Inventory, registry_node.NodeRegistryPaths]:
    """An inventory whose registry node is this machine (127.0.0.1), and its files under ``tmp_path``."""
    local = [{"name": "node1", "address": "127.0.0.1", "role": "primary"}]
    inv = _inventory({"node": "node1", "port": _free_port()}, nodes=local)
    files = ensure_tls(inv)
    directory = tmp_path / "registry"
    directory.mkdir(mode=0o700)
    paths = registry_node.NodeRegistryPaths(
        str(directory), *(str(directory / n) for n in ("config.yml", "c", "k", "storage", "log", "pid"))
    )
    Path(paths.certificate).write_bytes(files.server_cert.read_bytes())
    Path(paths.key).write_bytes(files.server_key.read_bytes())
    Path(paths.config).write_text(
        registry_config(
            storage=paths.storage, listen=inv.registry_endpoint, certificate=paths.certificate, key=paths.key
        )
    )
    return inv, paths


def _sh(command: str) -> str:
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=30, check=True
    ).stdout


def test_the_start_command_serves_tls_and_the_stop_command_leaves_nothing_running(tmp_path: Path) -> None:
    inv, paths = _local_registry(tmp_path)
    group = _sh(registry_node.start_command(paths)).strip()
    try:
        assert Path(paths.pid).read_text().strip() == group
        endpoint = wait_until_answers(
            inv, exited=lambda: not _group_alive(group), log_tail=lambda: Path(paths.log).read_text(), fix="-"
        )
        assert endpoint == inv.registry_endpoint
    finally:
        _sh(registry_node.stop_command(paths))
    assert not _group_alive(group)  # timeout and docker-registry, the whole group
    assert not Path(paths.pid).exists()
    _sh(registry_node.stop_command(paths))  # nothing to stop: still succeeds


def test_the_stop_command_removes_unfinished_uploads_and_keeps_whole_blobs(tmp_path: Path) -> None:
    _, paths = _local_registry(tmp_path)
    v2 = Path(paths.storage) / "docker" / "registry" / "v2"
    upload = v2 / "repositories" / "clusterctl" / "bench" / "_uploads" / "0b6f3c1e" / "data"
    blob = v2 / "blobs" / "sha256" / "ab" / "ab12" / "data"
    link = v2 / "repositories" / "clusterctl" / "bench" / "_layers" / "sha256" / "ab12" / "link"
    for path in (upload, blob, link):
        path.parent.mkdir(parents=True)
        path.write_text("x")
    _sh(registry_node.stop_command(paths))
    assert not upload.parent.exists()
    assert upload.parent.parent.is_dir() and blob.is_file() and link.is_file()


def test_the_stop_command_never_kills_a_process_that_took_over_the_recorded_id(tmp_path: Path) -> None:
    _, paths = _local_registry(tmp_path)
    other = subprocess.Popen(["setsid", "sleep", "30"])
    try:
        Path(paths.pid).write_text(f"{other.pid}\n")
        _sh(registry_node.stop_command(paths))
        assert other.poll() is None  # not a registry of this cluster: left alone
    finally:
        other.kill()
        other.wait()


def test_a_registry_nobody_stops_ends_after_its_lifetime(tmp_path: Path) -> None:
    inv, paths = _local_registry(tmp_path)
    group = _sh(registry_node.start_command(paths, lifetime_s=2)).strip()
    wait_until_answers(inv, exited=lambda: not _group_alive(group), log_tail=lambda: "", fix="-")
    deadline = time.monotonic() + 20
    while _group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(group)


def test_a_registry_that_cannot_listen_is_reported_with_its_log(tmp_path: Path) -> None:
    inv, paths = _local_registry(tmp_path)
    Path(paths.config).write_text(Path(paths.config).read_text().replace("127.0.0.1", "192.0.2.1"))
    group = _sh(registry_node.start_command(paths)).strip()
    try:
        with pytest.raises(EnvironmentProblem, match=r"(?s)did not answer within .*192\.0\.2\.1.*Fix: check"):
            wait_until_answers(
                inv,
                exited=lambda: not _group_alive(group),
                log_tail=lambda: Path(paths.log).read_text().strip(),
                fix="check the address",
            )
    finally:
        _sh(registry_node.stop_command(paths))
