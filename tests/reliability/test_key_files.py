"""Secrets on the controller's disk, and the one way a file reaches a node (issue 15, part 3).

The full-flow scan for leaked keys and the modes on the nodes run on the sandbox
(tests/integration/test_secrets.py); these are the parts that need no host.
"""

from __future__ import annotations

import ast
import stat
from pathlib import Path

import clusterctl
from clusterctl.hosts.sshkeys import ensure_keypair

PACKAGE = Path(clusterctl.__file__).parent
WRITER = PACKAGE / "hosts" / "sftp.py"
PAYLOAD = PACKAGE / "payload"
# Calls that put bytes into a file on a remote host: paramiko's SFTPClient.open/file/put/putfo and
# Fabric's Connection.put (which opens with mode "w" and follows a symlink at the path).
REMOTE_WRITES = {"put", "putfo", "file"}


def _remote_writes(path: Path) -> list[str]:
    """``file:line call`` for every call in ``path`` that could write a remote file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = ast.unparse(node.func.value)
        name = node.func.attr
        if name in REMOTE_WRITES or (name == "open" and "sftp" in receiver.lower()):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {receiver}.{name}")
    return found


def test_every_upload_goes_through_the_one_safe_sftp_writer() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40  # the whole package was walked
    # payload/ runs inside the benchmark container and reaches no host (test_layering: it imports no
    # clusterctl module, so no SSH either); its `file` calls are DALI's reader, not SFTP.
    nodeside = [path for path in modules if path != WRITER and PAYLOAD not in path.parents]
    elsewhere = [hit for path in nodeside for hit in _remote_writes(path)]
    assert elsewhere == []
    # the writer itself is what the walk would find: it opens exclusively ("x"), never "w"
    (own,) = _remote_writes(WRITER)
    assert own.endswith("sftp.open")
    assert 'sftp.open(dest, "wx")' in WRITER.read_text()


def test_every_writer_caller_is_a_node_upload() -> None:
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path != WRITER and ("write_file(" in path.read_text() or "write_private_dir(" in path.read_text())
    )
    assert callers == [
        "containers/lifecycle.py",
        "data/deliver.py",
        "image/registry_node.py",
        "provision/executor.py",
        "run/backends/slurm.py",
    ]


def test_a_new_key_is_0600_in_a_0700_directory_even_one_that_existed(tmp_path: Path) -> None:
    shared = tmp_path / "state" / "sandbox"
    shared.mkdir(parents=True, mode=0o755)
    shared.chmod(0o755)  # as a directory made for other files first (inventory, state) is
    ensure_keypair(shared / "id_ed25519", "test")
    fresh = tmp_path / "state" / "clusters" / "c" / "ssh" / "hostkeys" / "node1" / "key"
    ensure_keypair(fresh, "test")
    for key in (shared / "id_ed25519", fresh):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    # an existing key's directory is tightened too (a state directory from an older clusterctl)
    shared.chmod(0o755)
    ensure_keypair(shared / "id_ed25519", "test")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o700
