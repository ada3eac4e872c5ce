"""The cluster registry on a node (``delivery.registry.node``), over the project's SSH, for one push.

Its files live in the node's ``/var/lib/clusterctl/registry/<cluster>`` (0700, root's): the configuration,
the server certificate and key (uploaded with the one safe SFTP writer, the key 0600) and ``storage/``,
the blobs, kept between pushes so that a later push moves only new layers. ``docker-registry serve`` is
started in a session of its own under ``timeout`` and stopped, its whole process group, when the push's
``with`` block ends, on failure and interrupt too. Should clusterctl itself die mid-push, ``timeout``
still ends the registry after ``LIFETIME_S``, and the next push stops a leftover one before it starts.
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

import fabric

from clusterctl.errors import ConnectError, EnvironmentProblem
from clusterctl.hosts.command import Command, CommandResult
from clusterctl.hosts.sftp import write_file
from clusterctl.hosts.ssh import connect, run
from clusterctl.image.registry import (
    REPOSITORIES,
    ensure_tls,
    registry_config,
    running_on_controller,
    wait_until_answers,
)
from clusterctl.inventory import Inventory, Node

# Where the registries of every cluster keep their files on a node (clusterctl's, root only).
NODE_ROOT = "/var/lib/clusterctl/registry"
# Seconds a registry may live on a node at most, should nobody stop it: longer than a whole `image push`
# (its fan-out's deadline is distribute.LOAD_TIMEOUT_S, 1800 s).
LIFETIME_S = 3600
# Seconds each short command on the node (probe, start, stop) may take.
COMMAND_TIMEOUT_S = 30
# Tenths of a second the registry gets to exit on SIGTERM before its group is killed.
STOP_WAIT_TENTHS = 50


@dataclass(frozen=True)
class NodeRegistryPaths:
    """The registry's files on the node, for one cluster."""

    directory: str
    config: str
    certificate: str
    key: str
    storage: str
    log: str
    pid: str


def node_paths(inventory: Inventory) -> NodeRegistryPaths:
    """Where the cluster's registry keeps its files on the node that runs it."""
    directory = posixpath.join(NODE_ROOT, inventory.cluster.name)
    names = ("config.yml", "server.crt", "server.key", "storage", "registry.log", "registry.pid")
    return NodeRegistryPaths(directory, *(posixpath.join(directory, name) for name in names))


def start_command(paths: NodeRegistryPaths, lifetime_s: int = LIFETIME_S) -> str:
    """Start the registry in a session of its own (its process group is the ``timeout`` that bounds it),
    detached from the SSH channel; record and print its process group ID."""
    q = shlex.quote
    return (
        f"setsid timeout -k 10 {int(lifetime_s)} docker-registry serve {q(paths.config)} "
        f">{q(paths.log)} 2>&1 </dev/null & echo $! >{q(paths.pid)}; cat {q(paths.pid)}"
    )


def stop_command(paths: NodeRegistryPaths) -> str:
    """Stop the registry whose group ID ``paths.pid`` records, if that process still serves this cluster's
    configuration (never a process that took over a reused ID): SIGTERM, then SIGKILL to the group.

    Then, with no registry of this cluster running, remove its unfinished uploads (Distribution never
    resumes them; see ``clusterctl.image.registry``); whole blobs stay. Every start runs this first.
    """
    q = shlex.quote
    uploads = q(posixpath.join(paths.storage, *REPOSITORIES))
    return (
        f'p=$(cat {q(paths.pid)} 2>/dev/null); '
        f'if [ -n "$p" ] && grep -qaF {q(paths.config)} "/proc/$p/cmdline" 2>/dev/null; then '
        f'kill -TERM "-$p" 2>/dev/null; i=0; '
        f'while kill -0 "-$p" 2>/dev/null && [ "$i" -lt {STOP_WAIT_TENTHS} ]; do sleep 0.1; i=$((i+1)); done; '
        f'kill -KILL "-$p" 2>/dev/null; fi; rm -f {q(paths.pid)}; '
        f"[ ! -d {uploads} ] || find {uploads} -path '*/_uploads/*' -prune -exec rm -rf {{}} +"
    )  # fmt: skip


def _ok(result: CommandResult, node: Node, what: str) -> str:
    """``result``'s stdout, or EnvironmentProblem naming the node and ``what`` failed."""
    if not result.ok:
        detail = result.error or (result.stderr.strip() or f"exit {result.exit_code}")
        raise EnvironmentProblem(
            f"the cluster registry on {node.name} (delivery.registry.node): {what} failed ({detail}). Fix: "
            "check the node (root over SSH, /var/lib/clusterctl writable), or use `--transport stream`."
        )
    return result.stdout


def _stop(inventory: Inventory, node: Node, conn: fabric.Connection, paths: NodeRegistryPaths) -> None:
    """Stop the registry on the open connection, or on a new one when that connection dropped.

    A node that cannot be reached at all keeps its registry until ``timeout`` ends it (``LIFETIME_S``).
    """
    if run(conn, node, stop_command(paths), timeout_s=COMMAND_TIMEOUT_S).ok:
        return
    with contextlib.suppress(ConnectError), connect(inventory, node) as again:
        run(again, node, stop_command(paths), timeout_s=COMMAND_TIMEOUT_S)


@contextlib.contextmanager
def running_on_node(inventory: Inventory, node: Node) -> Iterator[str]:
    """The cluster's registry on ``node``, started for the ``with`` block and stopped after it; yields its
    endpoint (the node's address and the registry's port).

    Raises:
        ConnectError: the node cannot be reached over SSH.
        EnvironmentProblem: ``docker-registry`` is not installed on the node, its files cannot be written,
            or it does not answer in time (its log's tail is in the message).
    """
    files = ensure_tls(inventory)
    paths = node_paths(inventory)
    with connect(inventory, node) as conn:

        def on_node(command: Command) -> CommandResult:
            return run(conn, node, command, timeout_s=COMMAND_TIMEOUT_S)

        found = on_node("command -v docker-registry")
        if found.error is None and found.exit_code != 0:
            raise EnvironmentProblem(
                f"docker-registry (CNCF Distribution) is not installed on {node.name}, the node that runs the "
                "cluster registry (delivery.registry.node). Fix: run `clusterctl provision` (its "
                "registry-server step installs it), or `apt-get install docker-registry` on the node, or use "
                "`--transport stream`."
            )
        _ok(found, node, "looking for docker-registry")
        _ok(on_node(["install", "-d", "-m", "0700", NODE_ROOT, paths.directory]), node, "mkdir")
        _ok(on_node(stop_command(paths)), node, "stopping a registry left from an earlier push")
        config = registry_config(
            storage=paths.storage,
            listen=inventory.registry_endpoint,
            certificate=paths.certificate,
            key=paths.key,
        )
        sftp = conn.sftp()
        for data, dest, mode in (
            (config.encode(), paths.config, 0o600),
            (files.server_cert.read_bytes(), paths.certificate, 0o600),
            (files.server_key.read_bytes(), paths.key, 0o600),
        ):
            try:
                write_file(sftp, data, dest, mode)
            except OSError as exc:
                raise EnvironmentProblem(
                    f"the cluster registry on {node.name} (delivery.registry.node): writing {dest} failed "
                    f"({exc}). Fix: make /var/lib/clusterctl writable for {node.ssh.user} there, or use "
                    "`--transport stream`."
                ) from None
        try:
            group = _ok(on_node(start_command(paths)), node, "starting docker-registry").strip()
            yield wait_until_answers(
                inventory,
                exited=lambda: on_node(f"kill -0 -{shlex.quote(group)}").exit_code != 0,
                log_tail=lambda: " | ".join(
                    on_node(["tail", "-n", "4", paths.log]).stdout.strip().splitlines()
                ),
                fix=f"check that {node.address} is an address of {node.name} that the controller reaches and "
                f"port {inventory.delivery.registry.port} is free there; log: {node.name}:{paths.log}.",
            )
        finally:
            _stop(inventory, node, conn, paths)


def running_registry(inventory: Inventory) -> contextlib.AbstractContextManager[str]:
    """The cluster's registry where the inventory puts it, started for a ``with`` block that gets its
    endpoint: on ``delivery.registry.node`` (``running_on_node``), else on the controller
    (``registry.running_on_controller``).

    Raises:
        EnvironmentProblem: the registry cannot start or does not answer in time, where it runs.
    """
    host = inventory.registry_node
    return running_on_controller(inventory) if host is None else running_on_node(inventory, host)
