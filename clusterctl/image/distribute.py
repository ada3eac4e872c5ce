"""Bring the built image to every node, in parallel, and prove each node holds the same image ID.

A node that already holds the image ID is skipped. Otherwise a ``Transport`` delivers it; afterwards
the ID on the node is compared with the builder's. Two transports:

- ``RegistryTransport`` (``delivery.transport: registry``): the builder's engine pushes the image once
  to the cluster's TLS registry on the controller or on ``delivery.registry.node``
  (``clusterctl.image.registry``, started for this push only, and only when some node lacks the image); every node pulls in parallel, only the layers
  it lacks. A payload-only rebuild moves only the last, small layers.
- ``StreamTransport`` (``stream``): ``docker save`` on the builder streamed into ``docker load`` on the
  node over SSH, the whole image each time, at most ``SOURCE_STREAMS`` at once; for nodes that cannot
  reach the registry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

import docker
import docker.errors
import paramiko

from clusterctl.errors import ClusterctlError, InputError
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import fan_out
from clusterctl.image.build import builder_client, read_record
from clusterctl.image.registry import layer_sizes, running_registry, trust_on_controller
from clusterctl.inventory import Inventory, Node

# Seconds a node's engine may stay silent while it loads a streamed image (it unpacks layers at the end).
LOAD_TIMEOUT_S = 1800
# Bytes per chunk read from the builder's `docker save` stream.
CHUNK_BYTES = 1 << 20
# `docker save` streams the builder's engine serves at once. Each one re-reads and re-tars every layer on
# the builder (CPU and disk bound): more at once only split its throughput, so every node finishes later.
SOURCE_STREAMS = 4


@dataclass
class DeliveryResult:
    """What delivery did on one node."""

    node: str
    status: Literal["skipped", "delivered", "failed"]
    image_id: str | None = None
    bytes_sent: int = 0
    duration_s: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The node holds the builder's image ID."""
        return self.status != "failed"

    def to_json(self) -> dict[str, object]:
        """The node's status, bytes moved, seconds and error, for ``image push --json``."""
        return {
            "status": self.status,
            "image_id": self.image_id,
            "bytes_moved": self.bytes_sent,
            "seconds": round(self.duration_s, 3),
            "error": self.error,
        }


def summary(results: dict[str, DeliveryResult]) -> str:
    """One line that agrees with the per-node results: failures first, then the bytes moved."""
    moved = sum(r.bytes_sent for r in results.values())
    failed = [name for name, r in results.items() if not r.ok]
    if failed:
        return f"{len(failed)} of {len(results)} node(s) failed ({', '.join(failed)}); {moved:,} bytes moved"
    if moved or any(r.status == "delivered" for r in results.values()):
        return f"{moved:,} bytes moved"
    return "nothing moved: every node already holds the image"


class Transport(Protocol):
    """A way to put the image on one node's engine; skip and verify are done around it."""

    def deliver(self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]) -> None:
        """Put the image on ``node`` (reached through ``client``), telling ``on_bytes`` of every byte moved."""
        ...


def _event_error(event: dict) -> str | None:
    """The error an engine's progress event (load, push, pull) carries, if any."""
    return event.get("error") or (event.get("errorDetail") or {}).get("message")


@dataclass
class StreamTransport:
    """``docker save`` on the builder streamed into ``docker load`` on the node, counted as it goes.

    At most ``streams`` nodes are served at once; the others wait their turn.
    """

    source: docker.DockerClient
    reference: str
    streams: int = SOURCE_STREAMS

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.streams)

    def deliver(self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]) -> None:
        """Stream the image tar to the node's engine; ``on_bytes`` gets every chunk's size."""

        def counted(chunks: Iterable[bytes]) -> Iterator[bytes]:
            for chunk in chunks:
                on_bytes(len(chunk))
                yield chunk

        with self._slots:
            for event in client.api.load_image(
                counted(self.source.api.get_image(self.reference, CHUNK_BYTES))
            ):
                error = _event_error(event)
                if error:
                    raise docker.errors.APIError(f"docker load on {node.name}: {error}")


class RegistryTransport:
    """Push once to the cluster's registry (when the first node turns out to lack the image), then pull.

    The registry runs inside ``stack`` (closed by the caller after the fan-out). A push that fails
    fails every node that needed it, each with the push's error.
    """

    def __init__(
        self, inventory: Inventory, source: docker.DockerClient, reference: str, stack: contextlib.ExitStack
    ):
        self.inventory, self.source, self.reference, self.stack = inventory, source, reference, stack
        self._lock = threading.Lock()
        self._pushed: tuple[str, dict[str, int]] | None = None
        self._failure: Exception | None = None

    def _push(self) -> tuple[str, dict[str, int]]:
        endpoint = self.stack.enter_context(running_registry(self.inventory))
        repository, tag = self.reference.rsplit(":", 1)
        remote = f"{endpoint}/{repository}"
        self.source.api.tag(self.reference, remote, tag)
        try:
            for event in self.source.api.push(remote, tag, stream=True, decode=True):
                error = _event_error(event)
                if error:
                    raise docker.errors.APIError(f"push to the cluster registry {endpoint}: {error}")
        finally:
            with contextlib.suppress(docker.errors.DockerException):
                self.source.api.remove_image(f"{remote}:{tag}")  # the tag only: the image keeps its own
        return f"{remote}:{tag}", layer_sizes(self.inventory, repository, tag)

    def pushed(self) -> tuple[str, dict[str, int]]:
        """The registry's reference of the image and its layer sizes, pushing on the first call."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._pushed is None:
                try:
                    self._pushed = self._push()
                except Exception as exc:
                    self._failure = exc
                    raise
            return self._pushed

    def deliver(self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]) -> None:
        """Pull the image from the registry onto the node; ``on_bytes`` gets the layer bytes downloaded."""
        remote, sizes = self.pushed()
        repository, tag = remote.rsplit(":", 1)
        counted: dict[str, int] = {}

        def report(layer: str, upto: int) -> None:
            if upto > counted.get(layer, 0):
                on_bytes(upto - counted.get(layer, 0))
                counted[layer] = upto

        for event in client.api.pull(repository, tag, stream=True, decode=True):
            error = _event_error(event)
            if error:
                hint = (
                    " Fix: run `clusterctl provision` (its registry-ca step installs the cluster's CA in "
                    f"/etc/docker/certs.d/{self.inventory.registry_endpoint}/ on the node)."
                    if "certificate" in error or "x509" in error
                    else ""
                )
                raise docker.errors.APIError(f"docker pull on {node.name}: {error}.{hint}")
            layer, status = event.get("id", ""), event.get("status", "")
            if status == "Downloading":
                report(layer, int((event.get("progressDetail") or {}).get("current") or 0))
            elif status in ("Download complete", "Pull complete") and layer in sizes:
                report(layer, sizes[layer])
        local_repository, local_tag = self.reference.rsplit(":", 1)
        client.api.tag(remote, local_repository, local_tag)
        client.api.remove_image(remote)  # the registry's name only; the image keeps the cluster's tag


def _image_id(client: docker.DockerClient, reference: str) -> str | None:
    try:
        return client.images.get(reference).id
    except docker.errors.ImageNotFound:
        return None


def deliver_to(
    inventory: Inventory,
    node: Node,
    reference: str,
    image_id: str,
    transport: Transport,
    on_bytes: Callable[[int], None],
) -> DeliveryResult:
    """Skip when ``node`` holds ``image_id`` already; else deliver and verify the ID on the node.

    A failure is returned with its error and the bytes that had moved by then.
    """
    start = time.monotonic()
    moved = 0

    def counted(n: int) -> None:
        nonlocal moved
        moved += n
        on_bytes(n)

    try:
        with contextlib.closing(docker_client(inventory, node, timeout_s=LOAD_TIMEOUT_S)) as client:
            if _image_id(client, reference) == image_id:
                return DeliveryResult(node.name, "skipped", image_id, duration_s=time.monotonic() - start)
            transport.deliver(node, client, counted)
            found = _image_id(client, reference)
    except (ClusterctlError, docker.errors.DockerException, OSError, paramiko.SSHException) as exc:
        return DeliveryResult(node.name, "failed", None, moved, time.monotonic() - start, error=str(exc))
    result = DeliveryResult(node.name, "delivered", found, moved, time.monotonic() - start)
    if found != image_id:
        result.status = "failed"
        result.error = (
            f"after delivery {reference} is {found or 'missing'} on {node.name}, expected {image_id}"
        )
    return result


def distribute(
    inventory: Inventory,
    *,
    transport: Literal["registry", "stream"] | None = None,
    on_bytes: Callable[[str, int], None] = lambda node, n: None,
    deadline_s: float = LOAD_TIMEOUT_S,
) -> tuple[str, dict[str, DeliveryResult]]:
    """Deliver the cluster's built image to every node in parallel.

    Args:
        inventory: the cluster.
        transport: how to deliver; default: the inventory's ``delivery.transport``.
        on_bytes: called with (node, bytes) for every chunk sent (for per-node progress).
        deadline_s: deadline for the whole fan-out.

    Returns:
        The image ID delivered, and each node's result.

    Raises:
        InputError: nothing was built yet, or the recorded image is no longer on the builder, or (registry,
            local builder) the registry's CA cannot be installed for the local engine.
    """
    record = read_record(inventory)
    if record is None:
        raise InputError(
            f"cluster {inventory.cluster.name}: no image built yet. Fix: run `clusterctl image build` first."
        )
    kind = transport or inventory.delivery.transport
    if kind == "registry" and inventory.registry_address is None:
        raise InputError(
            f"--transport registry: cluster {inventory.cluster.name} has neither delivery.registry.address nor "
            "delivery.registry.node. Fix: set address in the inventory to the controller's address as the nodes "
            "reach it, or node to the node that runs the registry, or use --transport stream."
        )
    source = builder_client(inventory, record.builder)
    with contextlib.closing(source), contextlib.ExitStack() as stack:
        if _image_id(source, record.reference) != record.image_id:
            raise InputError(
                f"{record.reference} ({record.image_id[:19]}) is no longer on the builder "
                f"{record.builder or 'local engine'}. Fix: run `clusterctl image build` again."
            )
        chosen: Transport
        if kind == "registry":
            if record.builder is None:
                trust_on_controller(inventory)
            chosen = RegistryTransport(inventory, source, record.reference, stack)
        else:
            chosen = StreamTransport(source, record.reference)
        results = fan_out(
            inventory.nodes,
            lambda node: deliver_to(
                inventory,
                node,
                record.reference,
                record.image_id,
                chosen,
                lambda n: on_bytes(node.name, n),
            ),
            deadline_s=deadline_s,
        )
    return record.image_id, {
        name: r if isinstance(r, DeliveryResult) else DeliveryResult(name, "failed", error=r.error)
        for name, r in results.items()
    }
