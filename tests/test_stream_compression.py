"""The stream transport's compression: the node-tools probe's parser, the choice of way, the error of a
failed compressed load, the per-node JSON, and the inventory switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import InventoryError
from clusterctl.image.distribute import DeliveryResult
from clusterctl.image.zstd_load import NODE_TOOLS, choose, load_failed, parse_node_tools
from clusterctl.inventory import Inventory, validate_document

# NODE_TOOLS_PROBE's output, captured: on a sandbox node before zstd was in its image (Debian bookworm,
# docker.io 20.10), and on this machine's controller (Debian bookworm, zstd package, Docker CE's CLI).
NODE_WITHOUT_ZSTD = "/usr/bin/docker\n/usr/bin/bash\n"
CONTROLLER_WITH_ZSTD = "/usr/bin/zstd\n/usr/local/bin/docker\n/usr/bin/bash\n"


def test_the_probe_names_the_tools_found_by_their_paths() -> None:
    assert parse_node_tools(CONTROLLER_WITH_ZSTD) == NODE_TOOLS
    assert parse_node_tools(NODE_WITHOUT_ZSTD) == {"docker", "bash"}
    assert parse_node_tools("") == frozenset()
    # A shell function or alias of that name is not a binary another process can run.
    assert parse_node_tools("zstd\nalias docker='podman'\n/usr/bin/bash\n") == {"bash"}


def test_compressed_only_when_allowed_and_the_node_has_every_tool() -> None:
    assert choose("auto", parse_node_tools(CONTROLLER_WITH_ZSTD)) == "zstd"
    assert choose("auto", parse_node_tools(NODE_WITHOUT_ZSTD)) == "none"
    assert choose("auto", frozenset({"zstd", "docker"})) == "none"  # no bash: no pipefail
    assert choose("auto", None) == "none"  # the probe could not tell: the plain stream
    assert choose("none", parse_node_tools(CONTROLLER_WITH_ZSTD)) == "none"


def test_a_failed_compressed_load_reports_the_nodes_status_and_the_end_of_its_output() -> None:
    said = "zstd: /*stdin*\\: unexpected end of file\nopen /var/lib/docker/tmp/docker-import-1: no space left"
    error = str(load_failed("node2", 1, "Loaded layer\n" * 500 + said))
    assert error.startswith("bash -o pipefail -c 'zstd -dc | docker load' on node2 exited 1: ")
    assert error.endswith("no space left")
    assert len(error) < 2200  # the end of a long output, not all of it
    silent = str(load_failed("node2", None, "", "stopped reading for 1800 s"))
    assert silent.endswith("on node2 gave no exit status: stopped reading for 1800 s")


def test_the_json_says_how_each_node_got_it() -> None:
    zstd = DeliveryResult("node1", "delivered", "sha256:a", 460_000_000, 30.0, compression="zstd")
    assert zstd.to_json() == {
        "status": "delivered",
        "image_id": "sha256:a",
        "bytes_moved": 460_000_000,
        "seconds": 30.0,
        "error": None,
        "compression": "zstd",
    }
    assert DeliveryResult("node2", "skipped", "sha256:a").to_json()["compression"] is None


def _inventory(delivery: dict) -> Inventory:
    document = {
        "cluster": {"name": "zstd-test"},
        "nodes": [{"name": "node1", "address": "10.0.0.11", "role": "primary"}],
        "delivery": delivery,
    }
    return validate_document(document, Path("inventory.yml"))


def test_the_inventory_switch_defaults_to_auto_and_refuses_what_it_does_not_know() -> None:
    assert _inventory({}).delivery.stream.compression == "auto"
    assert _inventory({"stream": {"compression": "none"}}).delivery.stream.compression == "none"
    with pytest.raises(InventoryError, match=r"delivery\.stream\.compression"):
        _inventory({"stream": {"compression": "gzip"}})
    with pytest.raises(InventoryError, match=r"delivery\.stream\.level"):
        _inventory({"stream": {"level": 3}})


def test_the_push_lines_show_how_each_node_got_it(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.image import print_deliveries

    results = {
        "node1": DeliveryResult("node1", "delivered", "sha256:a", 460_000_000, 30.0, compression="zstd"),
        "node2": DeliveryResult("node2", "delivered", "sha256:a", 1_396_000_000, 70.0, compression="none"),
        "node3": DeliveryResult("node3", "skipped", "sha256:a"),
    }
    print_deliveries("sha256:a", results)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "node1  delivered  460,000,000 bytes in 30.0 s, zstd; verified a",
        "node2  delivered  1,396,000,000 bytes in 70.0 s, none; verified a",
        "node3  skipped    already there",  # nothing was sent: no compression to show
    ]
