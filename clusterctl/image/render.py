"""Render the benchmark image's Dockerfile and build context from an inventory.

One template (``templates/Dockerfile.j2``) serves every profile; Jinja2 runs with StrictUndefined so
a missing value is an error, never an empty string in a Dockerfile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from clusterctl import __version__
from clusterctl.errors import InputError
from clusterctl.image.profiles import CUDA_KEYRING_VERSION
from clusterctl.inventory import Inventory
from clusterctl.paths import payload_files
from clusterctl.templating import template_environment

# Where the container's sshd and ssh client read their keys; mounted read-only at run time.
CONTAINER_SSH_DIR = "/etc/clusterctl/ssh"
# Where the payload scripts land in the image.
CONTAINER_PAYLOAD_DIR = "/opt/clusterctl/payload"


@dataclass(frozen=True)
class RenderedContext:
    """A written build context: its directory and the content hash of everything in it."""

    directory: Path
    dockerfile: Path
    content_hash: str


def template_values(inventory: Inventory) -> dict[str, object]:
    """The values the templates see: profile, base (digest-pinned when given), versions, port and fixed paths."""
    image = inventory.image
    return {
        "clusterctl_version": __version__,
        "profile": image.profile,
        "base": image.from_image,
        "cuda_keyring_version": CUDA_KEYRING_VERSION,
        "v": image.versions.model_dump(),
        "sshd_port": inventory.container.sshd_port,
        "ssh_dir": CONTAINER_SSH_DIR,
        "payload_dir": CONTAINER_PAYLOAD_DIR,
        "wheelhouse": image.wheelhouse is not None,
    }


def render_dockerfile(inventory: Inventory) -> str:
    """The Dockerfile text for the inventory's image profile."""
    return template_environment().get_template("Dockerfile.j2").render(**template_values(inventory))


def render_config(inventory: Inventory, name: str) -> str:
    """A rendered container config file (``sshd_config`` or ``ssh_config``)."""
    return template_environment().get_template(f"{name}.j2").render(**template_values(inventory))


def _hash_tree(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode())
        digest.update(b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` to ``target`` (wheels are hundreds of MB); copy across filesystems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def write_context(inventory: Inventory, out: Path) -> RenderedContext:
    """Write the Dockerfile and its build context into ``out`` (created or emptied of our files).

    The context holds ``Dockerfile``, ``config/`` (sshd and ssh client configs), ``payload/`` and,
    when the inventory names one, ``wheelhouse/`` (wheels installed with ``pip --no-index``).

    Raises:
        InputError: the inventory's wheelhouse is missing or holds no wheels.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config", "payload", "wheelhouse"):
        shutil.rmtree(out / name, ignore_errors=True)
    dockerfile = out / "Dockerfile"
    dockerfile.write_text(render_dockerfile(inventory))
    (out / "config").mkdir()
    for name in ("sshd_config", "ssh_config"):
        (out / "config" / name).write_text(render_config(inventory, name))
    (out / "payload").mkdir()
    for script in payload_files():
        shutil.copy2(script, out / "payload" / script.name)
    wheelhouse = inventory.image.wheelhouse
    if wheelhouse is not None:
        source = Path(wheelhouse).expanduser()
        wheels = sorted(source.glob("*.whl")) if source.is_dir() else []
        if not wheels:
            raise InputError(
                f"image.wheelhouse {wheelhouse}: no wheels there. Fix: run scripts/setup-env.sh "
                "(it builds the wheelhouse), or point image.wheelhouse at a directory of wheels."
            )
        (out / "wheelhouse").mkdir()
        for wheel in wheels:
            _link_or_copy(wheel, out / "wheelhouse" / wheel.name)
    return RenderedContext(out, dockerfile, _hash_tree(out))
