"""The cluster registry's TLS: a per-cluster CA made once, a server certificate naming the registry's
address and signed by that CA, remade (CA kept) when the address changes; the inventory's delivery block."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509

from clusterctl.errors import InventoryError
from clusterctl.image import registry
from clusterctl.image.registry import certs_d_path, ensure_tls
from clusterctl.inventory import Inventory, validate_document


def _inventory(address: str | None, transport: str = "registry") -> Inventory:
    document = {
        "cluster": {"name": "tls-test"},
        "nodes": [{"name": "node1", "address": "10.0.0.11", "role": "primary"}],
        "delivery": {"transport": transport, "registry": {"address": address} if address else {}},
    }
    return validate_document(document, Path("inventory.yml"))


def test_registry_transport_needs_an_address() -> None:
    with pytest.raises(
        InventoryError, match=r"field delivery: .*registry.address or registry.node.*Fix: set address"
    ):
        _inventory(None)
    assert _inventory(None, "stream").delivery.transport == "stream"
    assert _inventory("10.0.0.1").registry_endpoint == "10.0.0.1:5443"
    assert certs_d_path("10.0.0.1:5443") == Path("/etc/docker/certs.d/10.0.0.1:5443/ca.crt")


def test_server_certificate_names_the_address_and_chains_to_the_cluster_ca(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    files = ensure_tls(_inventory("10.0.0.1"))
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)  # raises when not signed by the cluster CA
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.1")]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert files.ca_key.stat().st_mode & 0o777 == 0o600
    assert files.server_key.stat().st_mode & 0o777 == 0o600

    again = ensure_tls(_inventory("10.0.0.1"))
    assert again.server_cert.read_bytes() == files.server_cert.read_bytes()  # kept when nothing changed

    before = files.ca_cert.read_bytes()
    moved = ensure_tls(_inventory("registry.cluster.example"))
    assert moved.ca_cert.read_bytes() == before  # the nodes trust this CA: it never changes
    server = x509.load_pem_x509_certificate(moved.server_cert.read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["registry.cluster.example"]
    server.verify_directly_issued_by(ca)


def test_the_controller_trusts_the_ca_for_the_registry_only_until_untrusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(registry, "CERTS_D", tmp_path / "certs.d")
    inv = _inventory("10.0.0.1")
    registry.trust_on_controller(inv)
    installed = tmp_path / "certs.d" / "10.0.0.1:5443" / "ca.crt"
    assert installed.read_bytes() == registry.registry_files(inv).ca_cert.read_bytes()
    installed.write_bytes(b"another cluster's CA\n")  # replaced since: not ours to remove
    assert not registry.untrust_on_controller(inv) and installed.exists()
    registry.trust_on_controller(inv)
    assert registry.untrust_on_controller(inv)
    assert not installed.parent.exists()
