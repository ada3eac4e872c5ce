"""Build the benchmark image once, on one builder engine, and record what was built.

The tag carries the content hash of the rendered build context, so an unchanged inventory (same
Dockerfile, configs, payload, wheels) maps to the same tag and the build is skipped; the engine's layer
cache keeps changed rebuilds fast. The tag is ``clusterctl/<cluster>:<profile>-<hash[:12]>`` unless
``container.image`` names one explicitly.

``up``, ``status`` and ``image push`` must know the image without rebuilding: the build writes an
``ImageRecord`` (reference, image ID, context hash, builder) to ``<cluster state>/image.json``
(``image.record``, where ``effective_image_ref`` reads ``container.image`` first, then that record).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions
from docker.models.images import Image
from docker.utils import parse_repository_tag

from clusterctl.errors import EnvironmentProblem, StepError
from clusterctl.hosts.docker_remote import API_VERSION, docker_client
from clusterctl.image.push_lock import held_lock
from clusterctl.image.record import ImageRecord, image_tag, record_path
from clusterctl.image.render import CONTEXT_MANIFEST, write_context
from clusterctl.inventory import Inventory
from clusterctl.paths import cluster_state_dir

# The build context's content hash, so a tag named in container.image is rebuilt when the content changes.
CONTEXT_LABEL = "io.clusterctl.context"
# Lines of build output kept for the error message when a step fails.
ERROR_TAIL_LINES = 30
# Seconds the engine may stay silent during a build step (the cpu profile's torch install is quiet
# for minutes on a slow disk).
BUILD_READ_TIMEOUT_S = 1800
# How long a build waits for another build of the same context on the local engine (two clusterctl
# processes on one controller, e.g. two clusters of one user, or two test sessions): one build's bound.
BUILD_LOCK_WAIT_S = BUILD_READ_TIMEOUT_S


def build_dir(inventory: Inventory) -> Path:
    """The build context directory of this cluster (wheels are hard-linked into it)."""
    return cluster_state_dir(inventory.cluster.name) / "build"


def builder_client(inventory: Inventory, builder: str | None) -> docker.DockerClient:
    """The docker client of the builder: the local engine (``None``) or a node's engine over SSH.

    Raises:
        EnvironmentProblem: the local engine is not reachable.
        ConnectError: the builder node is not reachable.
    """
    if builder is not None:
        return docker_client(inventory, inventory.node(builder), timeout_s=BUILD_READ_TIMEOUT_S)
    try:
        client = docker.from_env(version=API_VERSION, timeout=BUILD_READ_TIMEOUT_S)
        client.ping()
    except docker.errors.DockerException as exc:
        raise EnvironmentProblem(
            f"the local Docker engine is not reachable ({exc}). Fix: start it, or build on a node with "
            "--builder NODE."
        ) from None
    return client


def _existing(client: docker.DockerClient, tag: str, content_hash: str) -> Image | None:
    """The image tagged ``tag`` if it was built from this very context (its label says so), else None."""
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    return image if image.labels.get(CONTEXT_LABEL) == content_hash else None


def _pull_failure(client: docker.DockerClient, reference: str) -> str | None:
    """Pull ``reference`` onto the engine; None when it worked, else the engine's reason it did not."""
    repository, tag = parse_repository_tag(reference)
    try:
        for event in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            error = event.get("error") or (event.get("errorDetail") or {}).get("message")
            if error:
                return str(error).strip()
    except docker.errors.APIError as exc:
        return str(exc.explanation or exc).strip()
    return None


def ensure_base_image(client: docker.DockerClient, base: str, builder: str | None) -> None:
    """Make sure the builder's engine holds the base image, pulling it when missing, before any upload.

    Raises:
        EnvironmentProblem: the base image is missing and cannot be pulled; the message names the
            image, the builder and the fix.
    """
    try:
        client.images.get(base)
        return
    except docker.errors.ImageNotFound:
        pass
    reason = _pull_failure(client, base)
    if reason is None:
        return
    if builder is None:
        fix = f"run `docker pull {base}` where a registry answers, or set image.base to an image the local engine has"
        where = "the local Docker engine"
    else:
        fix = (
            f"pull it on {builder} (`docker pull {base}` there), or load it there "
            f"(`docker save {base} | ssh {builder} docker load`), or build on the local engine (no --builder)"
        )
        where = f"the builder node {builder}"
    raise EnvironmentProblem(
        f"the base image {base} is not on {where}, and pulling it there failed ({reason}). Fix: {fix}."
    )


def _stream_lines(events: Iterator[dict[str, object]], tail: list[str]) -> Iterator[str]:
    """Text lines of a decoded build stream; raises StepError with the output tail on an error event."""
    for event in events:
        detail = event.get("errorDetail")
        error = event.get("error") or (detail.get("message") if isinstance(detail, dict) else None)
        if error:
            shown = "\n".join(tail[-ERROR_TAIL_LINES:])
            raise StepError(f"image build failed: {str(error).strip()}\n--- last build output ---\n{shown}")
        text = event.get("stream")
        if isinstance(text, str):
            for line in text.splitlines():
                if line.strip():
                    tail.append(line)
                    del tail[:-ERROR_TAIL_LINES]
                    yield line


def run_build(
    client: docker.DockerClient,
    directory: Path,
    tag: str,
    content_hash: str,
    on_line: Callable[[str], None],
    *,
    where: str,
    read_timeout_s: int = BUILD_READ_TIMEOUT_S,
) -> None:
    """Send the context in ``directory`` to ``client``'s engine and build it as ``tag``, streaming its output.

    Raises:
        StepError: a build step failed, or the engine stayed silent for ``read_timeout_s`` or dropped
            the connection; the message carries the output tail.
    """
    tail: list[str] = []
    try:
        events = client.api.build(
            path=str(directory),
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
            # The SDK's build ignores the client's timeout (it passes its own, None: wait forever).
            timeout=read_timeout_s,
            # Only the content hash: image labels pass to every container of the image, and the
            # io.clusterctl.* container labels must mark exactly the containers `up` starts.
            labels={CONTEXT_LABEL: content_hash},
        )
        for line in _stream_lines(events, tail):
            on_line(line)
    # requests' errors come from sending the context, urllib3's from reading the streamed output.
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
        shown = "\n".join(tail[-ERROR_TAIL_LINES:])
        raise StepError(
            f"image build on {where}: the engine sent nothing for {read_timeout_s} s or the connection "
            f"dropped ({exc}).\n--- last build output ---\n{shown}"
        ) from None


@contextlib.contextmanager
def _one_local_build(
    content_hash: str, builder: str | None, on_line: Callable[[str], None]
) -> Iterator[None]:
    """One build of a context at a time on this machine's engine. Two at once (two clusters, two test
    sessions) would each make their own layers, so one tag would end on an image the other's record does
    not name; the second waits, then finds the first's image (``_existing``) or builds from its cache. A
    node's engine is not this machine's to lock: nothing is held for ``builder``."""
    if builder is not None:
        yield
        return
    locks = Path(tempfile.gettempdir()) / f"clusterctl-builds-{os.getuid()}"
    locks.mkdir(mode=0o700, exist_ok=True)
    with held_lock(
        locks / f"{content_hash}.lock",
        wait_s=BUILD_LOCK_WAIT_S,
        on_wait=on_line,
        what="build of this image context on the local engine",
        fix="then build again",
    ):
        yield


def build_image(
    inventory: Inventory,
    *,
    builder: str | None = None,
    on_line: Callable[[str], None] = lambda line: None,
) -> tuple[ImageRecord, bool]:
    """Render the context, build it on the builder unless the tag is already there, record the result.

    Args:
        inventory: the cluster.
        builder: node to build on; None builds on the local engine.
        on_line: called with every line of build output (for a progress display).

    Returns:
        The image record and whether a build ran (False: the tag was already on the builder).

    Raises:
        StepError: a build step failed (the message carries the step's output tail), or the builder's
            engine stayed silent for ``BUILD_READ_TIMEOUT_S`` or dropped the connection.
        EnvironmentProblem: the base image is not on the builder and cannot be pulled.
        InputError: the wheelhouse is missing.
    """
    directory = build_dir(inventory)
    if directory.is_dir() and not (directory / CONTEXT_MANIFEST).exists():
        # A context an older clusterctl wrote into its own state directory, without the manifest.
        shutil.rmtree(directory)
    context = write_context(inventory, directory)
    tag = image_tag(inventory, context.content_hash)
    with (
        contextlib.closing(builder_client(inventory, builder)) as client,  # an SSH session to a node
        _one_local_build(context.content_hash, builder, on_line),
    ):
        image = _existing(client, tag, context.content_hash)
        built = image is None
        if image is None:
            if inventory.image.from_image is not None:
                ensure_base_image(client, inventory.image.from_image, builder)
            where = builder or "the local engine"
            run_build(client, context.directory, tag, context.content_hash, on_line, where=where)
            image = client.images.get(tag)
    record = ImageRecord(
        reference=tag,
        image_id=image.id,
        content_hash=context.content_hash,
        builder=builder,
        built_at=datetime.now(UTC),
    )
    path = record_path(inventory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
    return record, built
