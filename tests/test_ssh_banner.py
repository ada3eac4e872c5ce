"""A failed SSH handshake reaches the user once, as clusterctl's own message (issue 26, item 11).

A server on loopback answers with an HTTP status line instead of an SSH banner (a web server on the
SSH port, a proxy): paramiko's transport thread logged "Error reading SSH protocol banner" with its
traceback on stderr, beside clusterctl's ConnectError.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.paths import STATE_DIR_ENV

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def not_ssh() -> Iterator[int]:
    """A loopback port whose server answers every connection with an HTTP status line, then closes."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:  # the fixture closed the socket
                return
            with client:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    thread.join(timeout=5)


# In a subprocess: pytest's logging plugin gives the root logger a handler, which hides the defect.
CONNECT = """
import sys
from clusterctl.errors import ConnectError
from clusterctl.hosts.ssh import connect
from clusterctl.inventory import load_inventory
inventory = load_inventory(sys.argv[1])
try:
    connect(inventory, inventory.primary)
except ConnectError as exc:
    print(exc)
"""


def test_a_bad_banner_is_one_clean_error_and_no_paramiko_traceback(tmp_path: Path, not_ssh: int) -> None:
    path = tmp_path / "inv.yml"
    path.write_text(
        "cluster: {name: c}\nnodes:\n  - {name: n1, address: 127.0.0.1, role: primary, "
        f"ssh: {{port: {not_ssh}, connect_timeout_s: 5}}}}\n"
    )
    env = {**os.environ, STATE_DIR_ENV: str(tmp_path / "state"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CONNECT, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert "unreachable" in done.stdout and "banner" in done.stdout.lower(), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "paramiko" not in done.stderr, done.stderr
