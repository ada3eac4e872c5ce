"""The readiness gate of a benchmark container: an SSH login at its sshd with the cluster key.

``up`` starts a node's container and waits, with backoff to a deadline, until its sshd accepts a
login (``wait_for_sshd``); ``status`` tries one login (``sshd_login``). The container host key is
checked against the cluster's known_hosts: an unknown key is refused.
"""

from __future__ import annotations

import logging
import threading
import time

import paramiko
from docker.models.containers import Container

from clusterctl.errors import StepError
from clusterctl.hosts.cluster_keys import ClusterKeys
from clusterctl.inventory import Inventory, Node

# paramiko logs a traceback for every refused banner; the readiness gate reports the reason itself.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

# The user mpirun logs in as between containers (the image's sshd permits key-only root login).
CONTAINER_USER = "root"
# One SSH login attempt at a container's sshd: connect, banner, auth, `true`.
LOGIN_ATTEMPT_TIMEOUT_S = 5.0
# Backoff between readiness attempts: first wait, growth factor, longest wait.
BACKOFF_FIRST_S, BACKOFF_FACTOR, BACKOFF_MAX_S = 0.25, 2.0, 4.0


class SshdNotReady(StepError):
    """A container's sshd did not answer a login with the cluster key (in time, or at all)."""


def sshd_login(
    inventory: Inventory, keys: ClusterKeys, node: Node, timeout_s: float = LOGIN_ATTEMPT_TIMEOUT_S
) -> str | None:
    """One SSH login at ``node``'s container sshd with the cluster key, running ``true``, within ``timeout_s``.

    The container host key is checked against the cluster's known_hosts (unknown keys are refused).
    Returns None when the login worked, else the reason it did not.
    """
    client = paramiko.SSHClient()
    client.load_host_keys(str(keys.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            node.address,
            port=inventory.container.sshd_port,
            username=CONTAINER_USER,
            key_filename=str(keys.client_key),
            look_for_keys=False,
            allow_agent=False,
            timeout=timeout_s,
            banner_timeout=timeout_s,
            auth_timeout=timeout_s,
        )
        _, stdout, _ = client.exec_command("true", timeout=timeout_s)
        code = stdout.channel.recv_exit_status()
        return None if code == 0 else f"`true` exited {code}"
    except (paramiko.SSHException, OSError, EOFError) as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        client.close()


def _exited_reason(container: Container) -> str | None:
    """Why the container is no longer running (its state and log tail), or None while it runs."""
    container.reload()
    if container.status in ("created", "running", "restarting"):
        return None
    logs = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
    return f"container {container.status} (exit {container.attrs['State'].get('ExitCode')}): {logs or 'no output'}"


def wait_for_sshd(
    inventory: Inventory,
    keys: ClusterKeys,
    node: Node,
    container: Container,
    *,
    deadline: float,
    abort: threading.Event,
) -> str:
    """Retry an SSH login at ``node``'s container sshd with exponential backoff until ``deadline``.

    Stops early when the container has exited (its log tail is the reason) or ``abort`` is set.
    Returns how long the sshd took to answer, in words.

    Raises:
        SshdNotReady: the sshd did not answer in time, the container exited, or ``abort`` was set.
    """
    where = f"{node.address}:{inventory.container.sshd_port}"
    start, delay, attempts = time.monotonic(), BACKOFF_FIRST_S, 0
    while True:
        attempts += 1
        remaining = max(deadline - time.monotonic(), 0.5)
        reason = sshd_login(inventory, keys, node, min(LOGIN_ATTEMPT_TIMEOUT_S, remaining))
        if reason is None:
            return f"sshd answered on {where} after {time.monotonic() - start:.1f} s"
        exited = _exited_reason(container)
        if exited:
            raise SshdNotReady(f"sshd on {where} cannot answer: {exited}")
        if abort.is_set() or time.monotonic() + delay > deadline:
            raise SshdNotReady(
                f"sshd on {where} did not answer an SSH login with the cluster key within "
                f"{time.monotonic() - start:.0f} s ({attempts} attempts; last: {reason})"
            )
        abort.wait(delay)
        delay = min(delay * BACKOFF_FACTOR, BACKOFF_MAX_S)
