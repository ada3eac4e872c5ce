"""A long-running command on a node whose stdout is read as it comes, stopped by closing its stdin.

``StreamedCommand.start`` connects (host key verified, as every connection: ``clusterctl.hosts.ssh``),
starts the command on its own SSH channel and a thread that keeps its output lines (at most
``max_lines``). ``stop`` sends end-of-file on the command's stdin, which a command that watches its
stdin takes as the order to exit, waits for it (bounded), then closes the channel and the connection:
sshd then closes the command's pipes, so even a command that missed the end of its stdin gets EPIPE on
its next write. If the controller itself dies, its TCP connection closes and sshd does the same.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import fabric
import paramiko

from clusterctl.errors import ConnectError
from clusterctl.hosts.command import Command
from clusterctl.hosts.ssh import as_shell, connect
from clusterctl.inventory import Inventory, Node

# Bytes read from the channel at once.
_CHUNK = 65536


@dataclass
class StreamedCommand:
    """One command running on one node, its output lines kept as they arrive."""

    node: Node
    conn: fabric.Connection
    channel: paramiko.Channel
    max_lines: int
    lines: list[str] = field(default_factory=list)
    dropped: int = 0
    _reader: threading.Thread | None = None

    @classmethod
    def start(cls, inventory: Inventory, node: Node, command: Command, *, max_lines: int) -> StreamedCommand:
        """Connect to ``node`` and start ``command`` there (stderr merged into stdout).

        Raises:
            ConnectError: the node cannot be reached, or the channel cannot be opened.
        """
        conn = connect(inventory, node)
        try:
            transport = conn.client.get_transport()
            if transport is None:
                raise ConnectError(f"{node.name}: the SSH connection closed before the command started.")
            channel = transport.open_session(timeout=node.ssh.connect_timeout_s)
            channel.set_combine_stderr(True)
            channel.exec_command(as_shell(command))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            conn.close()
            raise ConnectError(f"{node.name}: could not start a command over SSH ({exc}).") from None
        except BaseException:
            conn.close()
            raise
        streamed = cls(node, conn, channel, max_lines)
        streamed._reader = threading.Thread(
            target=streamed._read, name=f"clusterctl-stream-{node.name}", daemon=True
        )
        streamed._reader.start()
        return streamed

    def _read(self) -> None:
        partial = b""
        try:
            while chunk := self.channel.recv(_CHUNK):
                partial += chunk
                *complete, partial = partial.split(b"\n")
                self._keep(complete)
        except (OSError, EOFError, paramiko.SSHException):
            pass  # the connection went: what arrived is kept
        self._keep([partial] if partial else [])

    def _keep(self, raw: list[bytes]) -> None:
        for line in raw:
            if len(self.lines) < self.max_lines:
                self.lines.append(line.decode(errors="replace"))
            else:
                self.dropped += 1

    def stop(self, wait_s: float) -> int | None:
        """End the command's stdin, wait up to ``wait_s`` for it to exit, close everything; idempotent.

        Returns:
            Its exit status, or None when it did not exit in time (its channel is closed anyway).
        """
        status = None
        try:
            if not self.channel.closed:
                self.channel.shutdown_write()
            if self._reader is not None:
                self._reader.join(wait_s)
            if self.channel.exit_status_ready():
                status = self.channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            self.channel.close()
            self.conn.close()
        return status
