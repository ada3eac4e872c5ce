"""One node container on the local engine: create it, authorise the sandbox key, wait until it is ready,
read its host keys.

All of it goes through the local docker API (put_archive, exec), never through SSH: the node's host
key is read from inside the node before anyone connects to it, so the first SSH is already verified.
"""

from __future__ import annotations

import io
import socket
import tarfile
import time
from pathlib import Path

import docker
from docker.errors import APIError
from docker.models.containers import Container

from clusterctl.errors import EnvironmentProblem
from clusterctl.hosts.sshkeys import known_hosts_line
from clusterctl.sandbox.engine import Isolation, host_config
from clusterctl.sandbox.plan import NodePlan, SandboxPlan

# Seconds from start until a node's sshd and inner engine answer (about 5 s on an idle 2-core machine;
# dockerd's first start on an empty volume is the slow part).
READY_DEADLINE_S = 180
POLL_INTERVAL_S = 1.0
# The inner engine's data, kept on a volume: overlayfs cannot sit on the node's own overlayfs root.
INNER_DOCKER_DIR = "/var/lib/docker"
# A light node runs the node image's own entrypoint (host keys, Slurm's daemons again after a restart,
# sshd) with ``dockerd`` defined as a shell function that does nothing: the same image and start-up,
# without the engine that costs ~60 MiB and a CPU burst per node. The image still carries the docker
# CLI; with no daemon behind it, anything that needs an engine on the node fails, as it should.
LIGHT_ENTRYPOINT = ["/bin/sh", "-c", "dockerd() { :; }; . /usr/local/sbin/clusterctl-node-entrypoint"]


def create_node(
    client: docker.DockerClient,
    plan: SandboxPlan,
    node: NodePlan,
    image: str,
    isolation: Isolation,
    cpuset: str,
    shared: tuple[str, str] | None = None,
    *,
    light: bool = False,
    python: tuple[str, str] | None = None,
) -> Container:
    """Create (not start) ``node``'s container, limited to the CPUs ``cpuset``, and (unless ``light``:
    no engine) its engine volume, both labelled with the sandbox; ``shared`` (volume, path) is mounted
    too when given, and ``python`` (directory, path) read-only."""
    binds: dict[str, dict[str, str]] = {}
    if not light:
        client.volumes.create(node.volume, labels=plan.labels)
        binds[node.volume] = {"bind": INNER_DOCKER_DIR, "mode": "rw"}
    if python:  # a light Slurm node's PyTorch (clusterctl.sandbox.lightpython), read-only
        binds[python[0]] = {"bind": python[1], "mode": "ro"}
    if shared:
        binds[shared[0]] = {"bind": shared[1], "mode": "rw"}
    config = host_config(
        client,
        isolation,
        binds=binds,
        # Brings the node back when the local engine restarts, as a real host reboots into its services.
        restart_policy={"Name": "unless-stopped"},
        cpuset_cpus=cpuset,
    )
    endpoint = client.api.create_endpoint_config(ipv4_address=node.address, aliases=[node.name])
    created = client.api.create_container(
        image,
        name=node.container,
        hostname=node.name,
        entrypoint=LIGHT_ENTRYPOINT if light else None,
        labels=plan.labels,
        detach=True,
        host_config=config,
        networking_config=client.api.create_networking_config({plan.network: endpoint}),
    )
    return client.containers.get(created["Id"])


def node_cpuset(container: Container) -> str:
    """The CPUs ``container`` is limited to (its cpuset, e.g. ``0-1``); '' when it may use all."""
    return container.attrs.get("HostConfig", {}).get("CpusetCpus") or ""


def set_cpuset(container: Container, node: NodePlan, cpuset: str) -> None:
    """Limit the (created or running) ``container`` of ``node`` to the CPUs ``cpuset``.

    Raises:
        EnvironmentProblem: the engine refused; on cgroup v1 a node's cpuset cannot shrink below the
            CPUs of a benchmark container still nested in it.
    """
    try:
        container.update(cpuset_cpus=cpuset)
    except APIError as exc:
        raise EnvironmentProblem(
            f"sandbox node {node.name}: the engine would not move it to CPUs {cpuset} "
            f"({exc.explanation or exc}). Fix: `clusterctl down` (removes the benchmark containers "
            "inside the nodes), then `clusterctl sandbox up` again."
        ) from None
    container.reload()


def authorise_key(container: Container, public_key: str) -> None:
    """Write ``public_key`` as root's only authorised key (dir 0700, file 0600, owned by root).

    A plain file, not a read-only bind mount: provisioning manages this file later.
    """
    data = (public_key.strip() + "\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        directory = tarfile.TarInfo(".ssh")
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o700
        tar.addfile(directory)
        keys = tarfile.TarInfo(".ssh/authorized_keys")
        keys.size = len(data)
        keys.mode = 0o600
        tar.addfile(keys, io.BytesIO(data))
    container.put_archive("/root", buf.getvalue())


def trust_registry_ca(container: Container, endpoint: str, ca_pem: bytes) -> None:
    """Install the cluster registry's CA for the node's engine, as provision's registry-ca step does on a
    real host: ``/etc/docker/certs.d/<endpoint>/ca.crt`` (the engine reads it per request, no restart)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for directory in ("etc/docker", "etc/docker/certs.d", f"etc/docker/certs.d/{endpoint}"):
            entry = tarfile.TarInfo(directory)
            entry.type = tarfile.DIRTYPE
            entry.mode = 0o755
            tar.addfile(entry)
        ca = tarfile.TarInfo(f"etc/docker/certs.d/{endpoint}/ca.crt")
        ca.size = len(ca_pem)
        ca.mode = 0o644
        tar.addfile(ca, io.BytesIO(ca_pem))
    container.put_archive("/", buf.getvalue())


def sshd_answers(address: str, port: int = 22) -> bool:
    """Whether an SSH server greets on ``address:port`` within 2 s."""
    try:
        with socket.create_connection((address, port), timeout=2) as sock:
            sock.settimeout(2)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def _engine_answers(container: Container) -> bool:
    result = container.exec_run(["docker", "info", "--format", "{{.ServerVersion}}"])
    return result.exit_code == 0


def wait_ready(
    nodes: list[tuple[NodePlan, Container]], deadline_s: float = READY_DEADLINE_S, *, engine: bool = True
) -> None:
    """Wait until every node's sshd answers on port 22, (``engine``) its own engine answers
    ``docker info``, and its host keys can be read.

    Raises:
        EnvironmentProblem: a node stopped, or was not ready by the deadline; names the node and what
            it was still waiting for.
    """
    deadline = time.monotonic() + deadline_s
    pending = {node.name: (node, container) for node, container in nodes}
    waiting_for: dict[str, str] = {}
    while pending:
        for name, (node, container) in list(pending.items()):
            container.reload()
            if container.status not in ("running", "created"):
                logs = container.logs(tail=10).decode(errors="replace")
                raise EnvironmentProblem(
                    f"sandbox node {node.name} ({node.container}) stopped ({container.status}) while "
                    f"starting. Its last output:\n{logs}"
                )
            if not sshd_answers(node.address):
                waiting_for[name] = f"sshd on {node.address}:22"
            elif engine and not _engine_answers(container):
                waiting_for[name] = "its Docker engine (`docker info` inside it)"
            elif not _host_keys(container)[1]:
                # once seen on a 128-node light bed under load: sshd answered, the key read came back empty
                waiting_for[name] = "its SSH host keys (/etc/ssh/ssh_host_*_key.pub)"
            else:
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            detail = "; ".join(f"{name}: {waiting_for[name]}" for name in pending)
            first = next(iter(pending.values()))[0]
            raise EnvironmentProblem(
                f"sandbox nodes not ready after {deadline_s:.0f} s, still waiting for {detail}. Fix: look "
                f"at `docker logs {first.container}` and `docker exec {first.container} tail "
                "/var/log/dockerd.log`, then run `clusterctl sandbox up` again."
            )
        time.sleep(POLL_INTERVAL_S)


def _host_keys(container: Container) -> tuple[tuple[int | None, str], list[str]]:
    """The exec's exit code and output, and the host keys of the node's sshd (none unless it exited 0)."""
    result = container.exec_run(["sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub"])
    output = result.output.decode(errors="replace") if result.output else ""
    keys = [line for line in output.splitlines() if line.strip()] if result.exit_code == 0 else []
    return (result.exit_code, output), keys


def host_key_lines(container: Container, node: NodePlan) -> list[str]:
    """known_hosts lines (address and hostname, port 22) for every host key the node's sshd has.

    Raises:
        EnvironmentProblem: the node has no host key to read.
    """
    (exit_code, output), keys = _host_keys(container)
    if not keys:
        raise EnvironmentProblem(
            f"sandbox node {node.name}: no SSH host key to read (exit {exit_code}: {output.strip()})."
        )
    return [known_hosts_line([node.address, node.name], 22, key) for key in keys]


def record_host_keys(known_hosts: Path, node: NodePlan, lines: list[str]) -> bool:
    """Make ``lines`` the only entries for ``node``'s names in the sandbox's known_hosts; True if changed.

    This file belongs to the sandbox alone, and a re-created node has new keys: paramiko uses the first
    key it finds for a host, so the node's old lines are dropped here rather than left to conflict.
    """
    names = {node.address, node.name}
    existing = known_hosts.read_text().splitlines() if known_hosts.exists() else []
    mine = [line for line in existing if names & set(line.split(" ", 1)[0].split(","))]
    if sorted(mine) == sorted(lines):
        return False
    others = [line for line in existing if line not in mine]
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    tmp = known_hosts.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in [*others, *lines]))
    tmp.chmod(0o644)
    tmp.replace(known_hosts)
    return True
