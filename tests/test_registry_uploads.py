"""The cluster registry leaves no unfinished upload behind: Debian's docker-registry (installed by
scripts/setup-env.sh) run on loopback, an upload started over its HTTP API and never finished, as an
interrupted `image push` leaves it. A whole blob stays; the unfinished upload is gone once the registry
has stopped, and one planted while no registry ran is gone once it has started."""

from __future__ import annotations

import hashlib
import socket
import ssl
import urllib.request
import uuid
from pathlib import Path

import pytest

from clusterctl.image.registry import registry_files
from clusterctl.image.registry_node import running_registry
from clusterctl.inventory import Inventory, validate_document


def _inventory() -> Inventory:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    document = {
        "cluster": {"name": "uploads-test"},
        "nodes": [{"name": "node1", "address": "10.0.0.11", "role": "primary"}],
        "delivery": {"transport": "registry", "registry": {"address": "127.0.0.1", "port": port}},
    }
    return validate_document(document, Path("inventory.yml"))


def _request(url: str, context: ssl.SSLContext, method: str, data: bytes | None = None) -> str:
    """Send one request to the registry; the upload URL it answers with (``Location``)."""
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/octet-stream")
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        assert response.status in (201, 202), response.status
        return response.headers.get("Location", "")


def test_an_unfinished_upload_is_removed_and_whole_blobs_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = b"a whole layer"
    digest = hashlib.sha256(whole).hexdigest()
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    inventory = _inventory()
    files = registry_files(inventory)
    repository = files.storage / "docker" / "registry" / "v2" / "repositories" / "clusterctl" / "test"
    with running_registry(inventory) as endpoint:
        context = ssl.create_default_context(cafile=str(files.ca_cert))
        base = f"https://{endpoint}/v2/clusterctl/test/blobs/uploads/"
        location = _request(base, context, "POST", b"")
        _request(f"{location}&digest=sha256:{digest}", context, "PUT", whole)
        unfinished = _request(_request(base, context, "POST", b""), context, "PATCH", b"half a layer")
        assert unfinished
        assert len(list((repository / "_uploads").iterdir())) == 1  # there while the registry runs
    assert list((repository / "_uploads").iterdir()) == []
    blob = files.storage / "docker" / "registry" / "v2" / "blobs" / "sha256" / digest[:2] / digest / "data"
    assert blob.read_bytes() == whole
    assert (repository / "_layers" / "sha256" / digest / "link").is_file()

    left = repository / "_uploads" / str(uuid.uuid4())  # a controller killed before it stopped its registry
    left.mkdir()
    (left / "data").write_bytes(b"left behind")
    with running_registry(inventory):
        assert list((repository / "_uploads").iterdir()) == []
    assert blob.read_bytes() == whole
