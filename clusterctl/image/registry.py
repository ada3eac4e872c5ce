"""The cluster's image registry: CNCF Distribution (Debian's ``docker-registry``) with TLS, on the
controller, or on the node ``delivery.registry.node`` names (``clusterctl.image.registry_node``).

It runs only for the length of one ``image push``: started, pushed to once by the builder's engine,
pulled from by every node in parallel, stopped. Its blobs stay where it runs (the cluster's state
directory; on a node, /var/lib/clusterctl/registry/<cluster>), so a later push uploads only the layers
the registry lacks, and each node pulls only the layers it lacks.
What an interrupted push left half-uploaded does not stay: Distribution keeps an upload in progress under
``<repository>/_uploads/`` and never resumes it (a new push starts new uploads), and its own purge waits
up to an hour after start, longer than this registry ever runs. So ``running_on_controller`` removes every
``_uploads`` entry of the controller's registry before it starts and after it has exited, when no upload
can be in progress; whole blobs stay (digest-verified, the next push skips them).

TLS comes from a per-cluster CA made here (``registry/ca.crt``, key 0600) and a server certificate for
the registry's address (``Inventory.registry_address``). Every Docker engine that talks to the registry trusts that CA for that
one endpoint through ``/etc/docker/certs.d/<address:port>/ca.crt`` (``provision``'s registry-ca step
on the nodes; ``trust_on_controller`` for the local engine); nothing is made an insecure registry.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import EnvironmentProblem
from clusterctl.inventory import Inventory
from clusterctl.paths import cluster_state_dir

# Seconds the registry may take to answer its first request after it starts.
START_TIMEOUT_S = 20
# Seconds it may take to stop on SIGTERM before it is killed.
STOP_TIMEOUT_S = 10
# Where Distribution keeps each repository (its layer links and its unfinished ``_uploads``), under its
# storage directory.
REPOSITORIES = ("docker", "registry", "v2", "repositories")
# Where Docker engines look for a registry's CA.
CERTS_D = Path("/etc/docker/certs.d")


@dataclass(frozen=True)
class RegistryFiles:
    """The registry's files in the cluster's state directory."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        """The per-cluster CA certificate (PEM) that every engine trusts for this registry."""
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def config(self) -> Path:
        return self.directory / "config.yml"

    @property
    def storage(self) -> Path:
        """The registry's blobs, kept between pushes."""
        return self.directory / "storage"

    @property
    def log(self) -> Path:
        return self.directory / "registry.log"


def registry_files(inventory: Inventory) -> RegistryFiles:
    """Where the cluster's registry keeps its certificates, configuration and blobs."""
    return RegistryFiles(cluster_state_dir(inventory.cluster.name) / "registry")


def certs_d_path(endpoint: str) -> Path:
    """Where an engine looks for the CA of the registry at ``endpoint`` (``address:port``)."""
    return CERTS_D / endpoint / "ca.crt"


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(b"")
    tmp.chmod(0o600)
    tmp.write_bytes(data)
    tmp.replace(path)


def _subject_names(address: str) -> list:
    from cryptography import x509

    try:
        return [x509.IPAddress(ipaddress.ip_address(address))]
    except ValueError:
        return [x509.DNSName(address)]


def _certificate_names(pem: bytes) -> list:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(pem)
    return list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


def ensure_tls(inventory: Inventory) -> RegistryFiles:
    """The cluster's registry CA (made once) and a server certificate that names the registry's address.

    The server certificate is made again when the address changed; the CA never changes once made (the
    nodes trust it).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    files = registry_files(inventory)
    address = inventory.registry_address
    if address is None:
        raise EnvironmentProblem(
            f"cluster {inventory.cluster.name}: neither delivery.registry.address nor delivery.registry.node is "
            "set. Fix: set address to the controller's address as the nodes reach it, or node to the node "
            "that runs the registry, or use the stream transport."
        )
    now = datetime.datetime.now(datetime.UTC)
    pem = serialization.Encoding.PEM
    private = serialization.PrivateFormat.PKCS8
    if not (files.ca_cert.is_file() and files.ca_key.is_file()):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, f"clusterctl {inventory.cluster.name} registry CA")]
        )
        ca = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write_private(files.ca_key, ca_key.private_bytes(pem, private, serialization.NoEncryption()))
        files.ca_cert.write_bytes(ca.public_bytes(pem))
        files.server_cert.unlink(missing_ok=True)
    names = _subject_names(address)
    current = files.server_cert.is_file() and files.server_key.is_file()
    if current and _certificate_names(files.server_cert.read_bytes()) == names:
        return files
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    issuer_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    assert isinstance(issuer_key, ec.EllipticCurvePrivateKey)  # the CA key is only ever made above, on P-256
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(issuer_key, hashes.SHA256())
    )
    _write_private(files.server_key, key.private_bytes(pem, private, serialization.NoEncryption()))
    files.server_cert.write_bytes(cert.public_bytes(pem))
    return files


def trust_on_controller(inventory: Inventory) -> None:
    """Install the registry's CA for the local engine (the builder when no ``--builder`` node is named).

    Raises:
        EnvironmentProblem: ``/etc/docker/certs.d`` cannot be written here.
    """
    files = ensure_tls(inventory)
    target = certs_d_path(inventory.registry_endpoint)
    ca = files.ca_cert.read_bytes()
    if target.is_file() and target.read_bytes() == ca:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(ca)
    except OSError as exc:
        raise EnvironmentProblem(
            f"cannot install the registry's CA at {target} for the local Docker engine ({exc.strerror}). "
            f"Fix: copy {files.ca_cert} there as root, or build on a node (`image build --builder NODE`), "
            "or use `--transport stream`."
        ) from None


def untrust_on_controller(inventory: Inventory) -> bool:
    """Remove what ``trust_on_controller`` installed for this cluster (only if it is still this cluster's
    CA); True when something was removed."""
    files = registry_files(inventory)
    if inventory.registry_address is None or not files.ca_cert.is_file():
        return False
    target = certs_d_path(inventory.registry_endpoint)
    if not target.is_file() or target.read_bytes() != files.ca_cert.read_bytes():
        return False
    target.unlink()
    with contextlib.suppress(OSError):
        target.parent.rmdir()
    return True


def registry_config(*, storage: str, listen: str, certificate: str, key: str) -> str:
    """The registry's configuration: blobs under ``storage``, TLS on ``listen`` (``address:port``) only."""
    return (
        "version: 0.1\n"
        "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n"
        f"http:\n  addr: {listen}\n"
        f"  tls:\n    certificate: {certificate}\n    key: {key}\n"
    )


def _answers(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def purge_uploads(files: RegistryFiles) -> list[Path]:
    """Remove the unfinished uploads under the registry's storage (call only while it is not running);
    returns the upload directories removed."""
    repositories = files.storage.joinpath(*REPOSITORIES)
    # Distribution reserves names that start with "_" (no repository path component can be "_uploads").
    uploads = [entry for found in repositories.rglob("_uploads") for entry in found.iterdir()]
    for entry in uploads:
        shutil.rmtree(entry, ignore_errors=True)
    return uploads


def wait_until_answers(
    inventory: Inventory, *, exited: Callable[[], bool], log_tail: Callable[[], str], fix: str
) -> str:
    """Wait (at most ``START_TIMEOUT_S``) until the registry answers over TLS with the cluster's CA; its endpoint.

    Raises:
        EnvironmentProblem: it ``exited`` or did not answer in time; the message holds ``log_tail()`` and ``fix``.
    """
    endpoint = inventory.registry_endpoint
    context = ssl.create_default_context(cafile=str(registry_files(inventory).ca_cert))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(f"https://{endpoint}/v2/", context):
        if exited() or time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"the registry at {endpoint} did not answer within {START_TIMEOUT_S} s "
                f"({log_tail() or 'no output'}). Fix: {fix}"
            )
        time.sleep(0.2)
    return endpoint


@contextlib.contextmanager
def running_on_controller(inventory: Inventory) -> Iterator[str]:
    """The cluster's registry on the controller, started for the ``with`` block and stopped after it;
    yields its endpoint. Unfinished uploads are removed before it starts and after it has stopped
    (``purge_uploads``). ``registry_node.running_registry`` chooses between this and a node's.

    Raises:
        EnvironmentProblem: ``docker-registry`` is not installed on the controller, or the registry does
            not answer in time (its log's tail is in the message).
    """
    binary = shutil.which("docker-registry")
    if binary is None:
        raise EnvironmentProblem(
            "docker-registry (CNCF Distribution) is not installed on the controller. Fix: run "
            "scripts/setup-env.sh (apt-get install docker-registry), or use `--transport stream`."
        )
    files = ensure_tls(inventory)
    files.storage.mkdir(parents=True, exist_ok=True)
    purge_uploads(files)  # left by a controller that was killed before it could stop its registry
    files.config.write_text(
        registry_config(
            storage=str(files.storage),
            listen=inventory.registry_endpoint,
            certificate=str(files.server_cert),
            key=str(files.server_key),
        )
    )
    with files.log.open("wb") as log:
        process = subprocess.Popen(
            [binary, "serve", str(files.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield wait_until_answers(
            inventory,
            exited=lambda: process.poll() is not None,
            log_tail=lambda: " | ".join(files.log.read_text(errors="replace").strip().splitlines()[-4:]),
            fix=f"check that {inventory.registry_address} is an address of this machine and port "
            f"{inventory.delivery.registry.port} is free; log: {files.log}.",
        )
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
        purge_uploads(files)


def layer_sizes(inventory: Inventory, repository: str, tag: str) -> dict[str, int]:
    """The compressed size of each layer of ``repository:tag`` in the registry, by the short ID the
    engine's pull progress names it with (the digest's first 12 hex digits)."""
    files = registry_files(inventory)
    request = urllib.request.Request(
        f"https://{inventory.registry_endpoint}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )
    context = ssl.create_default_context(cafile=str(files.ca_cert))
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        manifest = json.load(response)
    return {layer["digest"].split(":")[1][:12]: int(layer["size"]) for layer in manifest.get("layers", [])}
