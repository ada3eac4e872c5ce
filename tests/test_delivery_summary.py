"""The `image push` summary line and JSON agree with the per-node results (never "nothing moved" on failure)."""

from __future__ import annotations

from clusterctl.image.distribute import DeliveryResult, summary


def test_failed_nodes_come_first_even_when_no_byte_moved() -> None:
    results = {
        "node1": DeliveryResult(
            "node1", "failed", error="('Connection aborted.', OSError('Socket is closed'))"
        ),
        "node2": DeliveryResult("node2", "skipped", "sha256:a"),
    }
    line = summary(results)
    assert line == "1 of 2 node(s) failed (node1); 0 bytes moved"


def test_a_failure_keeps_the_bytes_it_moved() -> None:
    results = {
        "node1": DeliveryResult("node1", "failed", None, 1_500_000, 3.0, "load aborted"),
        "node2": DeliveryResult("node2", "delivered", "sha256:a", 2_000_000, 4.0),
    }
    assert summary(results) == "1 of 2 node(s) failed (node1); 3,500,000 bytes moved"
    assert results["node1"].to_json() == {
        "status": "failed",
        "image_id": None,
        "bytes_moved": 1_500_000,
        "seconds": 3.0,
        "error": "load aborted",
        "compression": None,
    }


def test_nothing_moved_only_when_every_node_was_skipped() -> None:
    skipped = {n: DeliveryResult(n, "skipped", "sha256:a") for n in ("node1", "node2")}
    assert summary(skipped) == "nothing moved: every node already holds the image"
    delivered = {**skipped, "node3": DeliveryResult("node3", "delivered", "sha256:a", 0)}
    assert summary(delivered) == "0 bytes moved"
