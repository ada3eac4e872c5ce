"""Real SSH servers for tests, in this process on loopback (paramiko's server side).

``SshServer`` accepts any public key, can forward ``direct-tcpip`` channels (a ProxyJump gateway), can
serve SFTP over a local directory with OpenSSH's semantics (an open follows symlinks) and can run the
commands it is sent with the local ``sh``, so clusterctl's own connect, upload and command code runs
unchanged against it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import paramiko
from paramiko.common import AUTH_SUCCESSFUL, OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED, OPEN_SUCCEEDED
from paramiko.sftp import SFTP_OK

from clusterctl.hosts.sshkeys import ensure_keypair
from clusterctl.inventory import Inventory, validate_document

T = TypeVar("T")


class _Server(paramiko.ServerInterface):
    """Accepts any public key; allows sessions, and direct-tcpip channels when it is a gateway."""

    def __init__(self, owner: SshServer):
        self.owner = owner

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        self.owner.logins += 1
        return AUTH_SUCCESSFUL

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        return self.owner.sftp_root is not None and super().check_channel_subsystem_request(channel, name)

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return OPEN_SUCCEEDED if kind == "session" else OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple, destination: tuple) -> int:
        self.owner.forwards.append(destination)
        return OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        if not self.owner.exec_commands:
            return False
        threading.Thread(target=_execute, args=(channel, command.decode()), daemon=True).start()
        return True


def _execute(channel: paramiko.Channel, command: str) -> None:
    """Run ``command`` with this machine's ``sh`` as sshd runs it with the user's shell; its output and
    exit status go back on ``channel``."""
    done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=600, stdin=subprocess.DEVNULL)
    channel.sendall(done.stdout)
    channel.sendall_stderr(done.stderr)
    channel.send_exit_status(done.returncode)
    channel.close()


def _pipe(channel: paramiko.Channel, sock: socket.socket) -> None:
    """Copy bytes both ways between a forwarded channel and a TCP socket until either closes."""

    def copy(read, write) -> None:
        try:
            while data := read(32768):
                write(data)
        except OSError:
            pass
        finally:
            channel.close()
            sock.close()

    threading.Thread(target=copy, args=(channel.recv, sock.sendall), daemon=True).start()
    threading.Thread(target=copy, args=(sock.recv, channel.sendall), daemon=True).start()


class SshServer:
    """A loopback SSH server with its own host key; a gateway forwards direct-tcpip channels; with
    ``sftp_root`` it serves SFTP over that directory (``/x`` is ``sftp_root/x``); with ``exec_commands``
    it runs the commands it is sent on this machine, as the test's user (give ``sftp_root=Path("/")`` so
    both see the same paths)."""

    def __init__(
        self,
        host_key: Path,
        address: str,
        *,
        gateway: bool = False,
        sftp_root: Path | None = None,
        exec_commands: bool = False,
    ):
        self.host_key = paramiko.Ed25519Key.from_private_key_file(str(host_key))
        self.gateway = gateway
        self.sftp_root = sftp_root
        self.exec_commands = exec_commands
        self.forwards: list[tuple[str, int]] = []
        self.logins = 0
        self.listener = socket.create_server((address, 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def public(self) -> str:
        """The host key as ``TYPE BASE64``."""
        return f"{self.host_key.get_name()} {self.host_key.get_base64()}"

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(client,), daemon=True).start()

    def _session(self, client: socket.socket) -> None:
        transport = paramiko.Transport(client)
        transport.add_server_key(self.host_key)
        if self.sftp_root is not None:
            transport.set_subsystem_handler("sftp", paramiko.SFTPServer, LocalSftp, self.sftp_root)
        try:
            transport.start_server(server=_Server(self))
        except (paramiko.SSHException, EOFError):
            return
        while (channel := transport.accept(10)) is not None:
            if self.gateway and self.forwards:
                host, port = self.forwards[-1]
                _pipe(channel, socket.create_connection((host, port), timeout=5))

    def close(self) -> None:
        self.listener.close()


class Keys:
    """Fresh OpenSSH ed25519 key files in one directory (paramiko cannot generate ed25519 keys)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.count = 0

    def new(self) -> Path:
        """The path of a new private key."""
        self.count += 1
        path = self.directory / f"key{self.count}"
        ensure_keypair(path, "test")
        return path


class _Handle(paramiko.SFTPHandle):
    """An open local file behind an SFTP handle."""

    def __init__(self, fd: int, flags: int):
        super().__init__(flags)
        self.readfile = self.writefile = os.fdopen(fd, "r+b" if flags & (os.O_WRONLY | os.O_RDWR) else "rb")

    def stat(self) -> paramiko.SFTPAttributes:
        return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))

    def chattr(self, attr: paramiko.SFTPAttributes) -> int:
        if attr.st_mode is not None:
            os.fchmod(self.readfile.fileno(), attr.st_mode & 0o7777)
        return SFTP_OK


class LocalSftp(paramiko.SFTPServerInterface):
    """SFTP over a local directory with OpenSSH sftp-server's semantics: open follows symlinks."""

    def __init__(self, server: paramiko.ServerInterface, root: Path):
        super().__init__(server)
        self.root = root

    def _real(self, path: str) -> str:
        return str(self.root / path.lstrip("/"))

    def _call(self, action: Callable[[], T]) -> T | int:
        try:
            return action()
        except OSError as exc:
            assert exc.errno is not None  # the os calls behind every action set it
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def _ok(self, action: Callable[[], None]) -> int:
        """SFTP_OK once ``action`` ran, or the status of the OSError it raised."""

        def run() -> int:
            action()
            return SFTP_OK

        return self._call(run)

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> _Handle | int:
        return self._call(lambda: _Handle(os.open(self._real(path), flags, 0o666), flags))

    def stat(self, path: str) -> paramiko.SFTPAttributes | int:
        return self._call(lambda: paramiko.SFTPAttributes.from_stat(os.stat(self._real(path))))

    def lstat(self, path: str) -> paramiko.SFTPAttributes | int:
        return self._call(lambda: paramiko.SFTPAttributes.from_stat(os.lstat(self._real(path))))

    def remove(self, path: str) -> int:
        return self._ok(lambda: os.remove(self._real(path)))

    def mkdir(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        return self._ok(lambda: os.mkdir(self._real(path), attr.st_mode or 0o777))

    def chattr(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        mode = attr.st_mode
        assert mode is not None  # clusterctl's uploads only ever set the mode
        return self._ok(lambda: os.chmod(self._real(path), mode & 0o7777))


def one_node_inventory(tmp_path: Path, keys: Keys, server: SshServer, address: str, name: str) -> Inventory:
    """A one-node inventory (cluster ``name``) whose node is ``server`` at ``address``, its host key
    in the inventory's own known_hosts and a fresh identity from ``keys``."""
    known = tmp_path / f"{name}_known_hosts"
    known.write_text(f"[{address}]:{server.port} {server.public}\n")
    document = {
        "cluster": {"name": name},
        "nodes": [
            {
                "name": "n1",
                "address": address,
                "role": "primary",
                "ssh": {"port": server.port, "identity_file": str(keys.new()), "known_hosts": str(known)},
            }
        ],
    }
    return validate_document(document, tmp_path / "inv.yml")
