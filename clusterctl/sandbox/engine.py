"""The local Docker engine the sandbox runs on: reach it, and find how a node container may run.

A node runs its own dockerd, which needs more than a default container. ``--privileged`` is the
usual way; some hosts refuse it (a VM without a capability runc wants to apply) while still running
Docker-in-Docker with every capability but SYS_RESOURCE, no seccomp/AppArmor confinement, the host's
cgroup namespace and /sys/fs/cgroup mounted read-write. ``detect_isolation`` tries both with a tiny
probe container, in that order, and never assumes which one this machine allows.
"""

from __future__ import annotations

import ipaddress
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import docker
from docker.errors import APIError, DockerException, ImageNotFound
from requests.exceptions import RequestException

from clusterctl.errors import EnvironmentProblem
from clusterctl.inventory import parse_cpu_list

# Seconds for one call to the local engine (an image build streams, so each read is bounded by this).
ENGINE_TIMEOUT_S = 300
PING_TIMEOUT_S = 10
PROBE_WAIT_S = 60

IsolationMode = Literal["privileged", "capabilities"]


@dataclass(frozen=True)
class Isolation:
    """How node containers run: the mode's name and the host-config options it stands for.

    ``unmask_system_paths`` is ``--security-opt systempaths=unconfined``: the engine API has no such
    option, only empty MaskedPaths and ReadonlyPaths (the inner dockerd writes under /proc/sys).
    """

    mode: IsolationMode
    options: dict[str, Any] = field(default_factory=dict)
    unmask_system_paths: bool = False


ISOLATIONS: dict[IsolationMode, Isolation] = {
    "privileged": Isolation("privileged", {"privileged": True}),
    "capabilities": Isolation(
        "capabilities",
        {
            "cap_add": ["ALL"],
            # SYS_RESOURCE is the capability runc cannot apply where --privileged is refused.
            "cap_drop": ["SYS_RESOURCE"],
            "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
            "cgroupns": "host",
            "binds": {"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"}},
        },
        unmask_system_paths=True,
    ),
}


def host_config(
    client: docker.DockerClient,
    isolation: Isolation,
    binds: dict[str, dict[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The engine API HostConfig of a container in ``isolation`` mode, with ``binds`` and ``extra`` options."""
    options = dict(isolation.options)
    all_binds = {**options.pop("binds", {}), **(binds or {})}
    config = client.api.create_host_config(binds=all_binds or None, **options, **extra)
    if isolation.unmask_system_paths:
        config["MaskedPaths"] = []
        config["ReadonlyPaths"] = []
    return config


def local_engine() -> docker.DockerClient:
    """A client of the local engine ($DOCKER_HOST or the default socket), checked to answer.

    Raises:
        EnvironmentProblem: no engine answers; the message names where it looked and the fix.
    """
    where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        client.api.timeout = PING_TIMEOUT_S
        client.ping()
        client.api.timeout = ENGINE_TIMEOUT_S
    except DockerException as exc:
        raise EnvironmentProblem(
            f"no Docker engine answers at {where} ({exc}). The sandbox runs its nodes as containers on "
            "the local engine. Fix: run `bash scripts/setup-env.sh` (installs and starts Docker), or "
            "point DOCKER_HOST at a running engine."
        ) from None
    return client


def _probe(
    client: docker.DockerClient, image: str, isolation: Isolation, labels: dict[str, str]
) -> str | None:
    """Run ``true`` in a container with ``isolation``'s options; None on success, else the reason."""
    container = None
    try:
        created = client.api.create_container(
            image, entrypoint=["true"], labels=labels, host_config=host_config(client, isolation)
        )
        container = client.containers.get(created["Id"])
        container.start()
        status = container.wait(timeout=PROBE_WAIT_S)
        code = status.get("StatusCode")
        return None if code == 0 else f"probe exited {code}"
    except APIError as exc:
        return str(exc.explanation or exc)
    except (DockerException, RequestException) as exc:
        return str(exc)
    finally:
        if container is not None:
            container.remove(force=True)


def allowed_cpus(client: docker.DockerClient, image: str, labels: dict[str, str]) -> list[int]:
    """The CPUs a container on this engine may use when it is given no cpuset.

    Read in a probe container from ``image`` (its ``Cpus_allowed_list``), not from this machine: the
    engine may be elsewhere ($DOCKER_HOST), or itself limited to some of the machine's CPUs.

    Raises:
        EnvironmentProblem: the probe did not run, or printed no CPU list.
    """
    try:
        output = client.containers.run(
            image, entrypoint=["cat", "/proc/self/status"], labels=labels, remove=True
        )
    except (DockerException, RequestException) as exc:
        raise EnvironmentProblem(f"could not read the engine's CPUs in a probe container ({exc}).") from None
    text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "Cpus_allowed_list":
            try:
                return parse_cpu_list(value)
            except ValueError as exc:
                raise EnvironmentProblem(f"a probe container's Cpus_allowed_list: {exc}.") from None
    raise EnvironmentProblem("a probe container's /proc/self/status has no Cpus_allowed_list line.")


def detect_isolation(client: docker.DockerClient, image: str, labels: dict[str, str]) -> Isolation:
    """The first isolation mode in which a probe container from ``image`` runs: privileged, else capabilities.

    Raises:
        EnvironmentProblem: neither mode runs a container; both reasons are given.
    """
    try:
        client.images.get(image)
    except ImageNotFound:
        raise EnvironmentProblem(f"the probe image {image} is missing on the local engine.") from None
    reasons = {}
    for isolation in ISOLATIONS.values():
        reason = _probe(client, image, isolation, labels)
        if reason is None:
            return isolation
        reasons[isolation.mode] = reason
    detail = "; ".join(f"{mode}: {reason}" for mode, reason in reasons.items())
    raise EnvironmentProblem(
        f"this Docker engine runs no container able to host a nested engine ({detail}). Fix: run the "
        "sandbox where containers may be privileged, or where --cap-add=ALL with seccomp/AppArmor "
        "unconfined is allowed."
    )


def free_subnet(client: docker.DockerClient) -> str:
    """A 10.213.X.0/24 (X from 100 to 249, from a random start) that no network on the engine overlaps,
    for sandboxes that must not collide with others on the same engine (tests, bench/).

    Raises:
        EnvironmentProblem: every one of those subnets is taken.
    """
    used = [
        ipaddress.IPv4Network(config["Subnet"], strict=False)
        for network in client.networks.list()
        for config in (network.attrs.get("IPAM") or {}).get("Config") or []
        if config.get("Subnet") and ":" not in config["Subnet"]
    ]
    start = uuid.uuid4().int % 150
    for offset in range(150):
        candidate = ipaddress.IPv4Network(f"10.213.{100 + (start + offset) % 150}.0/24")
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise EnvironmentProblem(
        "no free 10.213.X.0/24 subnet on the local engine. Fix: remove unused networks (docker network ls)."
    )
