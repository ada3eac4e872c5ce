"""SSH key material clusterctl generates: per-cluster and per-sandbox ed25519 keys, known_hosts lines.

Keys are made here (never copied from the admin's ``~/.ssh``); private keys are created 0600 and
never rewritten; known_hosts files are appended to, never rewritten (pyinfra#1209 lost entries that way).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_ssh_private_key,
)


def ensure_keypair(private_path: Path, comment: str) -> str:
    """Create an ed25519 key pair at ``private_path`` (+ ``.pub``) unless one exists; return the public line.

    The private key file is created with mode 0600 before any byte is written to it, in a directory
    made 0700 (also when it existed: a key readable by nobody else in a directory anyone can list,
    rename in or, with group write, replace in would not stay private).
    """
    pub_path = private_path.with_name(private_path.name + ".pub")
    private_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_path.parent.chmod(0o700)
    if private_path.exists():
        return public_key_of(private_path, comment)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    line = f"{public} {comment}"
    pub_path.write_text(line + "\n")
    return line


def public_key_of(private_path: Path, comment: str = "") -> str:
    """The OpenSSH public key line of the private key at ``private_path``."""
    key = load_ssh_private_key(private_path.read_bytes(), password=None)
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{public} {comment}".strip()


def known_hosts_line(names: Iterable[str], port: int, public_key: str) -> str:
    """A known_hosts line for ``names`` on ``port`` (``[name]:port`` when the port is not 22).

    ``public_key`` is ``"TYPE BASE64 [comment]"``; the comment is dropped.

    Raises:
        ValueError: a name that could add a host or a line (whitespace, a comma, a control character),
            or a key that is not two fields; the inventory refuses such names, this is the last guard.
    """
    names = list(names)
    for name in names:
        if not name or any(c.isspace() or c in ",#[]" or not c.isprintable() for c in name):
            raise ValueError(f"{name!r} cannot be a host name in a known_hosts line")
    fields = public_key.split()
    if len(fields) < 2 or "\n" in public_key.strip():
        raise ValueError(f"{public_key[:40]!r} is not an OpenSSH public key line")
    hosts = ",".join(n if port == 22 else f"[{n}]:{port}" for n in names)
    return f"{hosts} {fields[0]} {fields[1]}"


def _entry(line: str) -> tuple[frozenset[str], str, str] | None:
    """A known_hosts line as (host patterns, key type, key), or None for comments and blank lines."""
    fields = line.split()
    if len(fields) < 3 or fields[0].startswith("#"):
        return None
    if fields[0].startswith("@"):  # @cert-authority / @revoked markers
        return _entry(" ".join(fields[1:]))
    return frozenset(fields[0].split(",")), fields[1], fields[2]


def fingerprint(public_key: str) -> str:
    """OpenSSH's SHA256 fingerprint of ``"TYPE BASE64 ..."``, as ssh-keygen -l prints it."""
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def append_known_hosts(path: Path, lines: Iterable[str]) -> list[str]:
    """Append the ``lines`` whose entry is not already in ``path`` (created 0644 if missing).

    Entries are compared whole (hosts, key type and key, whatever the spacing or host order), so
    nothing is appended twice. Returns the lines added.

    Raises:
        ValueError: a line that is not one known_hosts entry on one line.
    """
    wanted = list(lines)
    for line in wanted:
        if "\n" in line or "\r" in line or _entry(line) is None:
            raise ValueError(f"{line[:60]!r} is not one known_hosts entry")
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = {_entry(line) for line in path.read_text().splitlines()} if path.exists() else set()
    added = []
    for line in wanted:
        entry = _entry(line)
        if entry not in existing:
            existing.add(entry)
            added.append(line)
    if added:
        with path.open("a") as fh:
            fh.writelines(line + "\n" for line in added)
    return added
