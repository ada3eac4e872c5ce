"""The one way clusterctl writes a file on a node: over SFTP, never through what is already there.

Whatever is at the destination (a file, or a symlink an unprivileged user planted there) is removed
and the file created exclusively (``O_EXCL``), its mode set before any byte is written; the size that
arrived is checked. Used for every upload: provision's step files and the containers' SSH keys.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import shutil
import stat
from pathlib import Path

import paramiko

# Bytes read from a source and written over SFTP at a time (paramiko's largest SFTP write).
CHUNK = 32768

Source = bytes | Path
"""What may be written: bytes (a small file such as a key) or a controller file, streamed from disk."""


def _make_parents(sftp: paramiko.SFTPClient, directory: str) -> None:
    """Create ``directory`` and whichever of its parents are missing, each mode 0700."""
    missing: list[str] = []
    while directory not in ("", "/"):
        try:
            sftp.stat(directory)
            break
        except FileNotFoundError:
            missing.append(directory)
            directory = posixpath.dirname(directory)
    for path in reversed(missing):
        sftp.mkdir(path, 0o700)


def write_file(sftp: paramiko.SFTPClient, data: Source, dest: str, mode: int) -> None:
    """Write ``data`` to ``dest`` in chunks, its mode set before any byte is written.

    Missing parent directories are created, each mode 0700 (e.g. /root/.ssh on a host that never had
    one; /etc/docker/certs.d/<registry>/ where the engine never made certs.d). Whatever is at ``dest``
    is removed and the file created exclusively, so a file or symlink planted there is neither written
    through nor kept with its owner.

    Raises:
        OSError: the source cannot be read, the node refuses the file, or fewer bytes arrived.
    """
    _make_parents(sftp, posixpath.dirname(dest))
    with contextlib.suppress(FileNotFoundError):
        sftp.remove(dest)
    source = io.BytesIO(data) if isinstance(data, bytes) else data.open("rb")
    with source, sftp.open(dest, "wx") as fh:
        fh.chmod(mode & (stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO))
        fh.set_pipelined(True)
        shutil.copyfileobj(source, fh, CHUNK)
        sent = source.tell()
    arrived = sftp.stat(dest).st_size
    if arrived != sent:
        raise OSError(f"{dest}: {arrived} of {sent} bytes arrived")


def write_private_dir(sftp: paramiko.SFTPClient, remote: str, files: dict[str, bytes]) -> None:
    """Write ``files`` (name: bytes) into the directory ``remote``: missing parents made 0755, the
    directory itself 0700, each file written with ``write_file`` at 0600 (whatever is at its path, a
    planted symlink, is removed first)."""
    path = ""
    for part in remote.strip("/").split("/"):
        path += "/" + part
        try:
            sftp.stat(path)
        except FileNotFoundError:
            sftp.mkdir(path, 0o755)
    sftp.chmod(remote, 0o700)
    for name, data in files.items():
        write_file(sftp, data, f"{remote}/{name}", 0o600)
