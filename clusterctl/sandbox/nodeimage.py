"""The sandbox's node image: render its build context, tag it by content, build it once.

The context is ``templates/node.Dockerfile.j2`` rendered for the base image, plus the ``node-*``
files it copies. The tag is ``clusterctl-node:<first 12 hex of the context's sha256>``, so an
unchanged context is never rebuilt and a changed one never reuses a stale image.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker
import jinja2
from docker.errors import APIError, ImageNotFound

from clusterctl.errors import EnvironmentProblem
from clusterctl.paths import data_dir

BASE_IMAGE_ENV = "CLUSTERCTL_BASE_IMAGE"
# The base scripts/setup-env.sh provides (pulled, or built with debootstrap where no registry answers).
DEFAULT_BASE_IMAGE = "debian:bookworm-slim"
REPOSITORY = "clusterctl-node"
# Files copied into the image next to the Dockerfile (their names are what the Dockerfile COPYs).
CONTEXT_FILES = ("node-entrypoint.sh", "node-sshd.conf")
# apt-get of the engine and sshd takes 3-6 minutes on 2 cores; beyond this something is stuck.
BUILD_DEADLINE_S = 1200


@dataclass(frozen=True)
class NodeImageContext:
    """A rendered build context: file name to content, and the tag derived from it."""

    files: dict[str, bytes]
    tag: str


def base_image() -> str:
    """The base image the node image starts from: ``$CLUSTERCTL_BASE_IMAGE`` or debian:bookworm-slim."""
    return os.environ.get(BASE_IMAGE_ENV) or DEFAULT_BASE_IMAGE


def _render(template: str, values: dict[str, str], copied: tuple[str, ...], prefix: str) -> NodeImageContext:
    templates = data_dir("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    files = {"Dockerfile": env.get_template(template).render(**values).encode()}
    for name in copied:
        files[name] = (templates / name).read_bytes()
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    return NodeImageContext(files=files, tag=f"{REPOSITORY}:{prefix}{digest.hexdigest()[:12]}")


def render_context(base: str) -> NodeImageContext:
    """Render the node image's Dockerfile for ``base`` and collect the files it copies (pure)."""
    return _render("node.Dockerfile.j2", {"base_image": base}, CONTEXT_FILES, "")


def render_slurm_context(node_image: str) -> NodeImageContext:
    """Render the Slurm node image's Dockerfile: ``node_image`` plus Slurm and munge (pure)."""
    return _render("node-slurm.Dockerfile.j2", {"node_image": node_image}, (), "slurm-")


def _tar(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(content))
    buf.seek(0)
    return buf


def ensure_node_image(
    client: docker.DockerClient, log: Callable[[str], None] = lambda _: None, *, slurm: bool = False
) -> str:
    """Build the node image (with ``slurm``: and its Slurm variant) unless it exists; return the tag.

    Raises:
        EnvironmentProblem: the base image is missing, or the build failed or ran past its deadline.
    """
    base = base_image()
    context = render_context(base)
    _ensure_built(client, context, base, log)
    if not slurm:
        return context.tag
    slurm_context = render_slurm_context(context.tag)
    _ensure_built(client, slurm_context, context.tag, log)
    return slurm_context.tag


def _ensure_built(
    client: docker.DockerClient, context: NodeImageContext, base: str, log: Callable[[str], None]
) -> None:
    try:
        client.images.get(context.tag)
        return
    except ImageNotFound:
        pass
    try:
        client.images.get(base)
    except ImageNotFound:
        raise EnvironmentProblem(
            f"the sandbox's base image {base} is not on the local Docker engine. Fix: run "
            f"`bash scripts/setup-env.sh` (it pulls it, or builds it with debootstrap where no registry "
            f"answers), or set {BASE_IMAGE_ENV} to a Debian/Ubuntu image you have."
        ) from None
    log(f"building node image {context.tag} from {base} (first time only: a few minutes)")
    deadline = time.monotonic() + BUILD_DEADLINE_S
    tail: list[str] = []
    try:
        for chunk in client.api.build(
            fileobj=_tar(context.files),
            custom_context=True,
            tag=context.tag,
            rm=True,
            forcerm=True,
            pull=False,
            labels={"io.clusterctl.node-image": "1"},
            decode=True,
        ):
            if "error" in chunk:
                raise EnvironmentProblem(
                    f"building the node image {context.tag} failed: {chunk['error'].strip()}. Last output:\n"
                    + "".join(tail[-15:])
                    + "Fix: check that the base image's apt mirror is reachable from containers."
                )
            if "stream" in chunk:
                tail.append(chunk["stream"])
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"building the node image {context.tag} ran past {BUILD_DEADLINE_S} s. Last output:\n"
                    + "".join(tail[-15:])
                )
    except APIError as exc:
        raise EnvironmentProblem(f"the engine refused to build the node image: {exc.explanation}") from None
