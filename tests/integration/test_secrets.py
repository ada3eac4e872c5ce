"""Secrets and privilege after a full sandbox flow (issue 15, part 3).

One pass of provision, image push, up, run, check, collect, report, status, a crash and down on the
session sandbox; then every output the flow made (stdout/stderr of each command, ``--json`` included,
the crash log, the state directory's logs, the run directories, history, bundles, the containers'
logs) is scanned for every private key clusterctl holds (the sandbox's node key, the cluster's client
key, each container host key): neither the PEM armour nor any line of the base64 body may appear.
Key files must be 0600 in 0700 directories, on the controller and on the nodes; the benchmark
containers must not see the admin's key and must not be privileged beyond the inventory.
"""

from __future__ import annotations

import stat
from pathlib import Path

import docker
import pytest

from clusterctl.cli import main
from clusterctl.containers import lifecycle
from clusterctl.hosts.cluster_keys import node_ssh_dir
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.sshkeys import ensure_keypair
from clusterctl.image.render import CONTAINER_SSH_DIR
from clusterctl.inventory import Inventory
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.integration

PEM_ARMOUR = "PRIVATE KEY-----"


def header_lines(tmp: Path) -> set[str]:
    """The base64 lines every unencrypted OpenSSH ed25519 key shares ("openssh-key-v1", cipher none,
    one key, ...): read from a fresh key, they are left out of the lines that identify a key."""
    ensure_keypair(tmp / "reference", "reference")
    return set((tmp / "reference").read_text().splitlines()[1:-1])


def key_body(path: Path, header: set[str]) -> list[str]:
    """The base64 lines of the private key at ``path`` that carry its own material."""
    lines = path.read_text(errors="replace").splitlines()[1:-1]
    return [line for line in lines if len(line) >= 16 and line not in header]


def private_keys(root: Path, header: set[str]) -> dict[Path, list[str]]:
    """Every private key file under ``root``, with the lines that carry its material."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            lines = path.read_text(errors="replace").splitlines()
            if lines and lines[0].startswith("-----BEGIN") and lines[0].endswith(PEM_ARMOUR):
                found[path] = key_body(path, header)
    return found


def leaks(text: str, keys: dict[Path, list[str]]) -> list[str]:
    """What of ``keys`` appears in ``text``: the armour, or a body line (named by key file)."""
    found = ["PEM armour"] if PEM_ARMOUR in text else []
    found += [f"a line of {path.name}" for path, body in keys.items() if any(line in text for line in body)]
    return found


def files_text(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` (bytes decoded leniently: sqlite history too)."""
    return {
        str(p): p.read_bytes().decode("utf-8", errors="replace")
        for root in roots
        if root.exists()
        for p in root.rglob("*")
        if p.is_file()
    }


def node_exec(sandbox: Sandbox, node: str, command: str) -> str:
    result = (
        docker.from_env()
        .containers.get(f"clusterctl-{sandbox.name}-{node}")
        .exec_run(["bash", "-c", command])
    )
    assert result.exit_code == 0, result.output
    return result.output.decode()


def test_no_private_key_in_any_output_and_keys_are_private(
    cluster: Inventory,
    sandbox2: Sandbox,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inv = ["-i", str(sandbox2.inventory_path)]
    header = header_lines(tmp_path)
    runs, bundle, collected = tmp_path / "runs", tmp_path / "bundle", tmp_path / "collected"
    outputs: dict[str, str] = {}

    def cli(*args: str) -> int:
        code = main(list(args))
        captured = capsys.readouterr()
        outputs[" ".join(args)] = captured.out + captured.err
        return code

    assert cli("provision", *inv, "--json") == 0
    assert cli("image", "push", *inv) == 0
    assert cli("up", *inv) == 0
    try:
        assert cli("status", *inv, "--json") == 0
        run_args = ["--steps", "2", "--warmup-steps", "1", "--batch-size", "2", "--image-size", "32"]
        assert cli("run", "resnet50", *inv, *run_args, "--runs-dir", str(runs), "--json") == 0
        assert cli("run", "resnet50", *inv, *run_args, "--runs-dir", str(runs)) == 0
        assert cli("report", "--runs-dir", str(runs), "--json") == 0
        assert cli("check", "topology", *inv, "--json", "--bundle", str(bundle)) == 0
        assert cli("collect", *inv, "-o", str(collected)) == 0
        assert cli("sandbox", "status", "--json") == 0

        # A crash while the keys are loaded: the crash log is one more output to scan.
        def crash(*args: object, **kwargs: object) -> None:
            raise RuntimeError("injected crash after the keys were read")

        with monkeypatch.context() as patched:
            patched.setattr(lifecycle, "status", crash)
            assert cli("status", *inv) == 1
        assert "crash-" in outputs[f"status {' '.join(inv)}"]

        _assert_containers_unprivileged_without_admin_keys(cluster, header)
        container_logs = {
            f"docker logs {name} on {node}": text for node, name, text in _container_logs(cluster)
        }
        _assert_key_modes_on_nodes(cluster, sandbox2)
    finally:
        assert cli("down", *inv) == 0

    keys = private_keys(sandbox2.state_dir, header)
    cluster_key = sandbox2.state_dir / "clusters" / cluster.cluster.name / "ssh" / "id_ed25519"
    identity_file = cluster.nodes[0].ssh.identity_file
    assert identity_file is not None
    assert cluster_key in keys and Path(identity_file) in keys
    assert len(keys) >= 2 + len(cluster.nodes)  # node key, cluster key, one host key per node
    for path in keys:  # 0600 files in 0700 directories
        modes = [stat.S_IMODE(p.stat().st_mode) for p in (path, path.parent)]
        assert modes == [0o600, 0o700], f"{path} and its directory are {modes[0]:o}, {modes[1]:o}"

    assert len(list((sandbox2.state_dir / "logs").glob("crash-*.log"))) >= 1
    scanned = {
        **outputs,
        **container_logs,
        **files_text(runs, bundle, collected, sandbox2.state_dir / "logs"),
    }
    assert len(list(runs.glob("*/output.log"))) == 2 and (runs / "history.sqlite").is_file()
    found = {where: what for where, text in scanned.items() if (what := leaks(text, keys))}
    assert found == {}


def _container_logs(inv: Inventory) -> list[tuple[str, str, str]]:
    logs = []
    for node in inv.nodes:
        client = docker_client(inv, node)
        try:
            for container in client.containers.list(filters={"label": "io.clusterctl.cluster"}):
                logs.append((node.name, container.name, container.logs().decode(errors="replace")))
        finally:
            client.close()
    assert len(logs) == len(inv.nodes)
    return logs


def _assert_containers_unprivileged_without_admin_keys(inv: Inventory, header: set[str]) -> None:
    """The benchmark containers: not privileged, IPC_LOCK plus the inventory's capabilities only, no
    device beyond the inventory's; mounts are the inventory's, localtime and the cluster's SSH directory
    (read-only); nothing in them (environment, SSH directory, /root) holds the admin's key."""
    assert inv.nodes[0].ssh.identity_file is not None
    admin_key = Path(inv.nodes[0].ssh.identity_file)
    admin_body = key_body(admin_key, header)
    admin_public = admin_key.with_name(admin_key.name + ".pub").read_text().split()[1]
    expected_mounts = {(m.source, m.target, not m.read_only) for m in inv.container.mounts} | {
        ("/etc/localtime", "/etc/localtime", False),
        (node_ssh_dir(inv), CONTAINER_SSH_DIR, False),
    }
    for node in inv.nodes:
        client = docker_client(inv, node)
        try:
            (container,) = client.containers.list(filters={"label": "io.clusterctl.cluster"})
            host = container.attrs["HostConfig"]
            assert host["Privileged"] is False
            assert sorted(host["CapAdd"] or []) == sorted({"IPC_LOCK", *inv.container.cap_add})
            assert not host.get("CapDrop")
            assert [d["PathOnHost"] for d in host.get("Devices") or []] == list(inv.container.devices)
            assert host.get("PidMode", "") in ("", "private") and host.get("IpcMode") != "host"
            assert not host.get("SecurityOpt")  # no seccomp/apparmor unconfined
            mounts = {(m["Source"], m["Destination"], m["RW"]) for m in container.attrs["Mounts"]}
            assert mounts == expected_mounts
            env = "\n".join(container.attrs["Config"]["Env"] or [])
            assert "PRIVATE" not in env and admin_public not in env
            inside = container.exec_run(
                ["sh", "-c", f"cat {CONTAINER_SSH_DIR}/* /root/.ssh/* 2>/dev/null; env"]
            ).output.decode(errors="replace")
            assert not any(line in inside for line in admin_body), f"{node.name}: the admin key is inside"
            assert admin_public not in inside, f"{node.name}: the admin's public key is trusted inside"
        finally:
            client.close()


def _assert_key_modes_on_nodes(inv: Inventory, sandbox: Sandbox) -> None:
    """On every node: the cluster SSH directory 0700 with 0600 files; /root/.ssh 0700, its key 0600."""
    ssh_dir = node_ssh_dir(inv)
    for node in inv.nodes:
        listing = node_exec(
            sandbox, node.name, f"stat -c '%a %n' {ssh_dir} {ssh_dir}/* /root/.ssh /root/.ssh/clusterctl-*"
        )
        modes = {path: mode for mode, path in (line.split(" ", 1) for line in listing.splitlines())}
        assert modes.pop(ssh_dir) == "700" and modes.pop("/root/.ssh") == "700", listing
        keys = {path: mode for path, mode in modes.items() if not path.endswith(".pub")}
        assert len(keys) >= 5 and set(keys.values()) == {"600"}, listing
