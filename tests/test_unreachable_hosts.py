"""An unreachable host is one line with its cause: no paramiko traceback, on a host that accepts the TCP
connection and closes it before the SSH banner (paramiko's transport thread logs two tracebacks for that)
and on one that refuses it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A port on 127.0.0.1 whose listener closes every connection at once (no SSH banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_provision_dry_run_prints_one_line_per_unreachable_host_and_no_traceback(
    closing_port: int, tmp_path: Path
) -> None:
    free = socket.socket()
    free.bind(("127.0.0.2", 0))  # bound, never listening: connections to it are refused
    refused_port = free.getsockname()[1]
    inventory = tmp_path / "inv.yml"
    inventory.write_text(
        "cluster: {name: closer, defaults: {ssh: {user: root, connect_timeout_s: 5}}}\n"
        "nodes:\n"
        f"  - {{name: n1, address: 127.0.0.1, role: primary, ssh: {{port: {closing_port}}}}}\n"
        f"  - {{name: n2, address: 127.0.0.2, ssh: {{port: {refused_port}}}}}\n"
    )
    env = {**os.environ, "CLUSTERCTL_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "clusterctl", "provision", "--dry-run", "-i", str(inventory)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    free.close()
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output and "Exception (client)" not in output, output
    lines = [line for line in output.splitlines() if "unreachable (" in line]
    assert len(lines) == 2, output  # one per host, not one per host and step
    assert "n1 (root@127.0.0.1" in lines[0] + lines[1] and "Error reading SSH protocol banner" in output
    assert "n2 (root@127.0.0.2" in output and "Connection refused" in output
