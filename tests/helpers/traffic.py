"""Traffic on the loopback interface, which every Linux machine has: what the counter tests count."""

from __future__ import annotations

import socket
import threading


def send_over_loopback(size: int) -> None:
    """Send ``size`` bytes to a local TCP listener (they cross ``lo`` twice: out and in)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        received = []

        def drain() -> None:
            conn, _ = server.accept()
            with conn:
                while chunk := conn.recv(1 << 16):
                    received.append(len(chunk))

        reader = threading.Thread(target=drain)
        reader.start()
        with socket.create_connection(server.getsockname()) as client:
            client.sendall(b"x" * size)
        reader.join(timeout=30)
    assert sum(received) == size
