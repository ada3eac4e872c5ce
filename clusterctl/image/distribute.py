"""Bring the built image to every node, in parallel, and prove each node holds the same image ID.

A node that already holds the image ID is skipped. Otherwise a ``Transport`` delivers it; afterwards
the ID on the node is compared with the builder's. Two transports:

- ``RegistryTransport`` (``delivery.transport: registry``): the builder's engine pushes the image once
  to the cluster's TLS registry on the controller or on ``delivery.registry.node``
  (``clusterctl.image.registry``, started for this push only, and only when some node lacks the image); every node pulls in parallel, only the layers
  it lacks. A payload-only rebuild moves only the last, small layers.
- ``StreamTransport`` (``stream``): ``docker save`` on the builder streamed into ``docker load`` on the
  node over SSH, the whole image each time; for nodes that cannot reach the registry. Compressed with
  zstd where the node has ``zstd`` (``clusterctl.image.zstd_load``; ``delivery.stream.compression:
  none`` turns it off): the builder saves and the controller compresses once for all such nodes
  (``clusterctl.image.spool``). Elsewhere the docker API's plain stream, one ``docker save`` per node, at
  most ``SOURCE_STREAMS`` at once.

Ctrl-C (or SIGTERM) stops a delivery cleanly: every node's engine connection is closed, which ends its
stream at once and makes the engine cancel its pull or load (a compressed stream's SSH connection is
closed too, which ends the node's ``zstd -dc | docker load``); the push to the registry stops at its
next progress event; the registry is stopped and its unfinished uploads removed
(``clusterctl.image.registry``); the temporary registry tag is removed from the builder. Then
``KeyboardInterrupt`` is raised again, its message saying what was interrupted.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, NoReturn, Protocol

import docker
import docker.errors
import paramiko
from fabric import Connection

from clusterctl.errors import ClusterctlError, InputError
from clusterctl.hosts.docker_remote import docker_client
from clusterctl.hosts.ssh import connect, fan_out
from clusterctl.image.build import builder_client
from clusterctl.image.push_lock import push_lock
from clusterctl.image.record import ImageRecord, read_image_record
from clusterctl.image.registry import layer_sizes, trust_on_controller
from clusterctl.image.registry_node import running_registry
from clusterctl.image.spool import CompressedSpool
from clusterctl.image.zstd_load import Compression, choose, load_compressed, probe_node_tools
from clusterctl.interrupts import sigterm_interrupts
from clusterctl.inventory import Inventory, Node
from clusterctl.paths import cluster_state_dir

# Seconds a node's engine may stay silent while it loads a streamed image (it unpacks layers at the end).
LOAD_TIMEOUT_S = 1800
# Bytes per chunk read from the builder's `docker save` stream.
CHUNK_BYTES = 1 << 20
# `docker save` streams the builder's engine serves at once. Each one re-reads and re-tars every layer on
# the builder (CPU and disk bound): more at once only split its throughput, so every node finishes later.
SOURCE_STREAMS = 4
# Seconds an interrupted delivery waits for its per-node work to end once every connection was closed.
INTERRUPT_GRACE_S = 30


class Interrupted(Exception):
    """Raised inside a delivery's per-node work once the delivery was interrupted."""


@dataclass
class DeliveryResult:
    """What delivery did on one node."""

    node: str
    status: Literal["skipped", "delivered", "failed"]
    image_id: str | None = None
    bytes_sent: int = 0
    duration_s: float = 0.0
    error: str | None = None
    compression: Compression | None = None  # how the stream transport sent it; None: no stream sent

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
            "compression": self.compression,
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


class _Refused:
    """Stands in for a client's transport adapter once its delivery was interrupted: refuses every request."""

    def send(self, *args: object, **kwargs: object) -> NoReturn:
        raise docker.errors.DockerException("the delivery was interrupted")

    def close(self) -> None:
        """Nothing to close."""


class InFlight:
    """The per-node work of one delivery and the engine clients it holds open, so that an interrupt can
    close them all (each engine then cancels its pull, load or push) and wait for the work to end."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._clients: set[docker.DockerClient] = set()
        self._connections: set[Connection] = set()
        self._working = 0
        self.stopped = threading.Event()

    @contextlib.contextmanager
    def holding(self, client: docker.DockerClient) -> Iterator[docker.DockerClient]:
        """Use ``client`` inside the block (closed after it, or by ``stop``).

        Raises:
            Interrupted: the delivery was stopped already.
        """
        with self._lock:
            if self.stopped.is_set():
                client.close()
                raise Interrupted("the delivery was interrupted")
            self._clients.add(client)
            self._working += 1
        try:
            yield client
        finally:
            client.close()
            with self._lock:
                self._clients.discard(client)
                self._working -= 1
                self._lock.notify_all()

    @contextlib.contextmanager
    def closing(self, connection: Connection) -> Iterator[Connection]:
        """Use ``connection`` (an SSH connection a transport opened) inside the block; ``stop`` closes it.

        Raises:
            Interrupted: the delivery was stopped already.
        """
        with self._lock:
            if self.stopped.is_set():
                raise Interrupted("the delivery was interrupted")
            self._connections.add(connection)
        try:
            yield connection
        finally:
            with self._lock:
                self._connections.discard(connection)

    def stop(self, timeout_s: float = INTERRUPT_GRACE_S) -> bool:
        """Close every client and connection in use, then wait (bounded) until no work holds one; True if
        all ended."""
        with self._lock:
            self.stopped.set()
            clients = list(self._clients)
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(Exception):  # the worker's channel send fails, and its node's pipe ends
                connection.close()
        for client in clients:
            # The node's SSH adapter would reconnect on the next request (a stream delivery waiting for
            # its turn would then start its load): every request from now on is refused instead.
            closed = client.api.get_adapter(client.api.base_url)
            client.api.mount(client.api.base_url, _Refused())
            with contextlib.suppress(Exception):  # closing from this thread: the worker sees its stream end
                closed.close()
        with self._lock:
            return self._lock.wait_for(lambda: self._working == 0, timeout_s)


class Transport(Protocol):
    """A way to put the image on one node's engine; skip and verify are done around it."""

    def deliver(
        self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]
    ) -> Compression | None:
        """Put the image on ``node`` (reached through ``client``), telling ``on_bytes`` of every byte moved.

        Returns how the bytes were compressed, for a transport that chooses (None: it does not).
        """
        ...


def _event_error(event: dict) -> str | None:
    """The error an engine's progress event (load, push, pull) carries, if any."""
    return event.get("error") or (event.get("errorDetail") or {}).get("message")


@dataclass
class StreamTransport:
    """``docker save`` on the builder streamed into ``docker load`` on the node, counted as it goes.

    With ``inventory`` (and its ``delivery.stream.compression`` auto), a node that has zstd gets the stream
    compressed over an SSH exec channel, every such node from one compressed copy (``close`` removes it);
    any other node gets the docker API's plain stream, at most ``streams`` of those at once (the others
    wait their turn).
    """

    source: docker.DockerClient
    reference: str
    inventory: Inventory | None = None
    in_flight: InFlight | None = None  # of the whole delivery: an interrupt closes the SSH connection
    streams: int = SOURCE_STREAMS

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.streams)
        self._spool = CompressedSpool(
            lambda: self.source.api.get_image(self.reference, CHUNK_BYTES), f"docker save {self.reference}"
        )

    def close(self) -> None:
        """Remove the compressed copy of the image, once every node's delivery has ended."""
        self._spool.close()

    def deliver(
        self, node: Node, client: docker.DockerClient, on_bytes: Callable[[int], None]
    ) -> Compression:
        """Stream the image tar to the node; ``on_bytes`` gets the size of every piece sent.

        Returns ``zstd`` when it went compressed, ``none`` when it went plain.
        """
        if self.inventory is not None and self.inventory.delivery.stream.compression == "auto":
            with connect(self.inventory, node) as conn, (self.in_flight or InFlight()).closing(conn):
                if choose("auto", probe_node_tools(conn, node)) == "zstd":
                    chunks = self._spool.chunks(timeout_s=LOAD_TIMEOUT_S)
                    load_compressed(conn, node, chunks, on_bytes, timeout_s=LOAD_TIMEOUT_S)
                    return "zstd"

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
        return "none"


class RegistryTransport:
    """Push once to the cluster's registry (when the first node turns out to lack the image), then pull.

    The registry runs inside ``stack`` (closed by the caller after the fan-out). A push that fails
    fails every node that needed it, each with the push's error.
    """

    def __init__(
        self,
        inventory: Inventory,
        source: docker.DockerClient,
        reference: str,
        stack: contextlib.ExitStack,
        stopped: threading.Event | None = None,
    ):
        self.inventory, self.source, self.reference, self.stack = inventory, source, reference, stack
        self.stopped = stopped or threading.Event()
        self._lock = threading.Lock()
        self._pushed: tuple[str, dict[str, int]] | None = None
        self._failure: Exception | None = None

    def _check_stopped(self) -> None:
        if self.stopped.is_set():
            raise Interrupted("the push to the cluster registry was interrupted")

    def _push(self) -> tuple[str, dict[str, int]]:
        self._check_stopped()
        endpoint = self.stack.enter_context(running_registry(self.inventory))
        repository, tag = self.reference.rsplit(":", 1)
        remote = f"{endpoint}/{repository}"
        self.source.api.tag(self.reference, remote, tag)
        try:
            events = self.source.api.push(remote, tag, stream=True, decode=True)
            # Closing the generator drops its response: the engine sees the connection end and cancels.
            with contextlib.closing(events):
                for event in events:
                    self._check_stopped()  # a local engine's socket cannot be closed from another thread
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
        self._check_stopped()  # the stream ended because an interrupt closed the client
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
    in_flight: InFlight | None = None,
) -> DeliveryResult:
    """Skip when ``node`` holds ``image_id`` already; else deliver and verify the ID on the node.

    A failure is returned with its error and the bytes that had moved by then. ``in_flight`` (of the
    whole delivery) holds the node's client, so that an interrupt can close it.
    """
    start = time.monotonic()
    moved = 0

    def counted(n: int) -> None:
        nonlocal moved
        moved += n
        on_bytes(n)

    in_flight = in_flight or InFlight()
    try:
        with in_flight.holding(docker_client(inventory, node, timeout_s=LOAD_TIMEOUT_S)) as client:
            if _image_id(client, reference) == image_id:
                return DeliveryResult(node.name, "skipped", image_id, duration_s=time.monotonic() - start)
            compression = transport.deliver(node, client, counted)
            found = _image_id(client, reference)
    except (
        ClusterctlError, docker.errors.DockerException, OSError, paramiko.SSHException, Interrupted
    ) as exc:  # fmt: skip
        return DeliveryResult(node.name, "failed", None, moved, time.monotonic() - start, error=str(exc))
    result = DeliveryResult(
        node.name, "delivered", found, moved, time.monotonic() - start, compression=compression
    )
    if found != image_id:
        result.status = "failed"
        result.error = (
            f"after delivery {reference} is {found or 'missing'} on {node.name}, expected {image_id}"
        )
    return result


def _interrupted_message(kind: str, ended: bool) -> str:
    stopped = (
        "the push to the registry and every pull were stopped, the registry stopped and its unfinished "
        "uploads removed"
        if kind == "registry"
        else "every image stream was stopped"
    )
    late = "" if ended else f" (some node's transfer had not ended after {INTERRUPT_GRACE_S} s)"
    return (
        f"image push interrupted: {stopped}{late}; a node that had not finished does not hold the new "
        "image. Fix: run `clusterctl image push` again."
    )


def distribute(
    inventory: Inventory,
    *,
    transport: Literal["registry", "stream"] | None = None,
    on_bytes: Callable[[str, int], None] = lambda node, n: None,
    deadline_s: float = LOAD_TIMEOUT_S,
    on_wait: Callable[[str], None] = lambda message: None,
) -> tuple[str, dict[str, DeliveryResult]]:
    """Deliver the cluster's built image to every node in parallel, one push per cluster at a time.

    Args:
        inventory: the cluster.
        transport: how to deliver; default: the inventory's ``delivery.transport``.
        on_bytes: called with (node, bytes) for every chunk sent (for per-node progress).
        deadline_s: deadline for the whole fan-out; a push of the same cluster already running is
            waited for at most as long (``on_wait`` is told who holds it).

    Returns:
        The image ID delivered, and each node's result.

    Raises:
        InputError: nothing was built yet, or the recorded image is no longer on the builder, or (registry,
            local builder) the registry's CA cannot be installed for the local engine.
        StepError: another push of this cluster still ran after ``deadline_s``.
        KeyboardInterrupt: Ctrl-C or SIGTERM; every transfer was stopped and the registry with it, and
            the message says so.
    """
    record = read_image_record(inventory)
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
    with push_lock(cluster_state_dir(inventory.cluster.name), wait_s=deadline_s, on_wait=on_wait):
        return _deliver(inventory, record, kind, on_bytes, deadline_s)


def _deliver(
    inventory: Inventory,
    record: ImageRecord,
    kind: str,
    on_bytes: Callable[[str, int], None],
    deadline_s: float,
) -> tuple[str, dict[str, DeliveryResult]]:
    """``distribute``'s delivery proper, under the cluster's push lock."""
    source = builder_client(inventory, record.builder)
    with contextlib.closing(source), contextlib.ExitStack() as stack:
        if _image_id(source, record.reference) != record.image_id:
            raise InputError(
                f"{record.reference} ({record.image_id[:19]}) is no longer on the builder "
                f"{record.builder or 'local engine'}. Fix: run `clusterctl image build` again."
            )
        in_flight = InFlight()
        chosen: Transport
        if kind == "registry":
            if record.builder is None:
                trust_on_controller(inventory)
            chosen = RegistryTransport(inventory, source, record.reference, stack, in_flight.stopped)
        else:
            stream = StreamTransport(source, record.reference, inventory, in_flight)
            stack.callback(stream.close)
            chosen = stream
        try:
            with sigterm_interrupts():
                results = deliver_all(
                    inventory, record.reference, record.image_id, chosen, on_bytes, deadline_s, in_flight
                )
        except KeyboardInterrupt:
            source.close()  # a builder node's SSH session: its push or `docker save` streams end with it
            ended = in_flight.stop()
            stack.close()  # the registry: stopped, its unfinished uploads removed
            raise KeyboardInterrupt(_interrupted_message(kind, ended)) from None
    return record.image_id, results


def deliver_all(
    inventory: Inventory,
    reference: str,
    image_id: str,
    transport: Transport,
    on_bytes: Callable[[str, int], None],
    deadline_s: float,
    in_flight: InFlight | None = None,
) -> dict[str, DeliveryResult]:
    """``deliver_to`` on every node in parallel under one deadline; a node past it is failed.

    ``in_flight`` (default: a new one) holds every node's open connections, for an interrupt to close.
    """
    in_flight = in_flight or InFlight()
    results = fan_out(
        inventory.nodes,
        lambda node: deliver_to(
            inventory, node, reference, image_id, transport, lambda n: on_bytes(node.name, n), in_flight
        ),
        deadline_s=deadline_s,
    )
    return {
        name: r if isinstance(r, DeliveryResult) else DeliveryResult(name, "failed", error=r.error)
        for name, r in results.items()
    }
