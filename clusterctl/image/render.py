"""Render the benchmark image's Dockerfile and build context from an inventory.

One template (``templates/Dockerfile.j2``) serves every profile; Jinja2 runs with StrictUndefined so
a missing value is an error, never an empty string in a Dockerfile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from clusterctl import __version__
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.inventory.profiles import CUDA_KEYRING_VERSION
from clusterctl.paths import payload_files
from clusterctl.templating import template_environment

# Where the container's sshd and ssh client read their keys; mounted read-only at run time.
CONTAINER_SSH_DIR = "/etc/clusterctl/ssh"
# Where the payload scripts land in the image.
CONTAINER_PAYLOAD_DIR = "/opt/clusterctl/payload"
# The file in a written context listing every file clusterctl wrote there: a later render deletes
# exactly those, and refuses a directory holding anything else.
CONTEXT_MANIFEST = ".clusterctl-context.json"


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


def _refuse_output(out: Path, problem: str, fix: str) -> InputError:
    return InputError(f"output directory {out}: {problem}. Fix: {fix}.")


def _written_files(out: Path) -> list[str]:
    """The files a previous render listed in ``out``'s manifest; raises InputError if ``out`` holds others.

    Anything not in the manifest (a file of the user's, a symlink, a directory clusterctl never made a
    file in) makes ``out`` someone else's directory: nothing is deleted.
    """
    found = sorted(
        str(Path(root, name).relative_to(out))
        for root, dirs, files in os.walk(out)
        for name in [*files, *(d for d in dirs if Path(root, d).is_symlink())]
    )
    if not found and not any(out.iterdir()):
        return []
    fix = "name a new or empty directory (clusterctl deletes only the files it wrote itself)"
    try:
        listed = json.loads((out / CONTEXT_MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise _refuse_output(out, "not empty, and not a build context clusterctl wrote", fix) from None
    foreign = [
        name for name in found
        if name != CONTEXT_MANIFEST and (name not in listed or (out / name).is_symlink())
    ]  # fmt: skip
    if foreign:
        names = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise _refuse_output(out, f"holds files clusterctl did not write ({names})", fix)
    return [name for name in found if name != CONTEXT_MANIFEST]


def _prepare_output(out: Path) -> None:
    """Make ``out`` an empty directory without deleting anything clusterctl did not write there.

    Raises:
        InputError: ``out`` is a symlink, a file or a device, cannot be created, or holds files
            clusterctl did not write.
    """
    if out.is_symlink():
        raise _refuse_output(out, "is a symbolic link", "name the directory itself, not a link to it")
    if out.exists() and not out.is_dir():
        raise _refuse_output(out, "exists and is not a directory", "name a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse_output(
            out, f"cannot be created ({exc.strerror})", "name a directory you can write"
        ) from None
    written = _written_files(out)
    for name in written:
        (out / name).unlink()
    for root, dirs, _ in os.walk(out, topdown=False):  # only directories emptied above remain
        for name in dirs:
            Path(root, name).rmdir()
    (out / CONTEXT_MANIFEST).unlink(missing_ok=True)


def write_context(inventory: Inventory, out: Path) -> RenderedContext:
    """Write the Dockerfile and its build context into ``out`` (new, empty, or a context written before).

    The context holds ``Dockerfile``, ``config/`` (sshd and ssh client configs), ``payload/`` and,
    when the inventory names one, ``wheelhouse/`` (wheels installed with ``pip --no-index``), and
    ``CONTEXT_MANIFEST``, the list of those files: a later call deletes exactly them and refuses a
    directory holding anything else.

    Raises:
        InputError: the inventory's wheelhouse is missing or holds no wheels, or ``out`` cannot be
            used (see ``_prepare_output``).
    """
    wheelhouse = inventory.image.wheelhouse
    wheels: list[Path] = []
    if wheelhouse is not None:
        source = Path(wheelhouse).expanduser()  # the inventory refused a ~user that does not expand
        wheels = sorted(source.glob("*.whl")) if source.is_dir() else []
        if not wheels:
            raise InputError(
                f"image.wheelhouse {wheelhouse}: no wheels there. Fix: run scripts/setup-env.sh "
                "(it builds the wheelhouse), or point image.wheelhouse at a directory of wheels."
            )
    _prepare_output(out)
    dockerfile = out / "Dockerfile"
    dockerfile.write_text(render_dockerfile(inventory))
    (out / "config").mkdir()
    for name in ("sshd_config", "ssh_config"):
        (out / "config" / name).write_text(render_config(inventory, name))
    (out / "payload").mkdir()
    for script in payload_files():
        shutil.copy2(script, out / "payload" / script.name)
    if wheels:
        (out / "wheelhouse").mkdir()
        for wheel in wheels:
            _link_or_copy(wheel, out / "wheelhouse" / wheel.name)
    content_hash = _hash_tree(out)  # before the manifest: the hash is of what the image is built from
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    (out / CONTEXT_MANIFEST).write_text(json.dumps({"written_by": "clusterctl", "files": files}, indent=1))
    return RenderedContext(out, dockerfile, content_hash)
