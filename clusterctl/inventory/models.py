"""The inventory: one YAML file describing the cluster, validated once at load by pydantic v2.

Every string that will later reach a shell (hostnames, interfaces, paths, versions, image names) is
checked here against a conservative pattern, so code downstream can trust the model. Unknown keys are
errors everywhere. ``load_inventory`` turns every problem into an ``InventoryError`` whose message
names the file, the line, the field and the fix.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from clusterctl.errors import InventoryError
from clusterctl.inventory.profiles import apply_profile_defaults
from clusterctl.yamlio import line_of, load_yaml

# --------------------------------------------------------------------------- value types

# How much of a bad value an error message quotes (a 1 MB value stays a one-paragraph message).
SHOWN_CHARS = 60


def shown(value: object) -> str:
    """``repr(value)``, cut to ``SHOWN_CHARS`` characters with the full length noted, for messages."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a kernel CPU list (``Cpus_allowed_list``, ``cpuset.cpus``: ``0-3,8``), sorted.

    Raises:
        ValueError: ``text`` is not such a list.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list (e.g. 0-3,8)")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"{text!r} is not a CPU list: range {part} runs backwards")
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def _pattern(regex: str, what: str, example: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(
                f"{shown(value)} cannot be {what} (it would reach a shell later); use only the characters "
                f"such a value has, e.g. {example!r}"
            )
        return value

    return AfterValidator(check)


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
NodeName = Annotated[str, _pattern(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", "a hostname label", "node1")]
DnsName = Annotated[
    str, _pattern(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*", "a hostname", "gpu01.example.org")
]
InterfaceName = Annotated[
    str, _pattern(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}", "a network interface name", "ib0")
]
HcaPort = Annotated[
    str, _pattern(r"[A-Za-z0-9_]{1,32}(:[0-9]{1,3})?", "an HCA name, optionally with a port", "mlx5_0:1")
]
UserName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a Unix user name", "root")]
SafePath = Annotated[
    str, _pattern(r"[A-Za-z0-9_./~@+=,:][A-Za-z0-9_./@+=,:-]*", "a path", "/home/dell/benchmarks")
]


def _check_home(value: str) -> str:
    """A controller path whose ``~`` or ``~user`` can be expanded here (where clusterctl reads it)."""
    try:
        Path(value).expanduser()
    except RuntimeError:
        user = value.split("/", 1)[0]
        raise ValueError(
            f"{shown(value)} starts with {user}, whose home directory is unknown on this machine (no such "
            "user, or no $HOME and no passwd entry); write the path in full, without ~"
        ) from None
    return value


# A path on the controller (the machine running clusterctl): a path whose ~ expands here.
LocalPath = Annotated[SafePath, AfterValidator(_check_home)]


def _check_list_path(value: str) -> str:
    """An absolute path that cannot split in the list syntaxes it is rendered into.

    Mount sources and targets and device paths reach ``docker -v src:dst[:ro]``, ``--device=p:p:rwm``,
    pyxis' ``--container-mounts=a:b,c:d`` and apptainer's ``--bind=a:b``: a ``,`` starts another
    mount and a ``:`` another field (a read-only mount would become a read-write one of any host
    path). A relative source is a docker *named volume*, not the node's directory.
    """
    for char, role in ((",", "separates two mounts"), (":", "separates a mount's source, target and flags")):
        if char in value:
            raise ValueError(
                f"{shown(value)} holds {char!r}, which {role} in docker -v, pyxis --container-mounts and "
                f"apptainer --bind, so one entry would become several; use a path without {char!r} "
                "(a symlink to it, e.g. /srv/data)"
            )
    if not value.startswith("/"):
        raise ValueError(
            f"{shown(value)} is not an absolute path (docker reads a relative mount source as a named volume); "
            "write the full path, e.g. /srv/data"
        )
    return value


# An absolute path in a list syntax: ',' and ':' refused with the reason first, then anything a path lacks.
ListPath = Annotated[
    str, AfterValidator(_check_list_path), _pattern(r"/[A-Za-z0-9_./@+=-]*", "an absolute path", "/srv/data")
]
Version = Annotated[str, _pattern(r"[0-9A-Za-z][0-9A-Za-z.+_~-]{0,63}", "a version", "4.7-3.2.9.0")]
ImageRef = Annotated[
    str,
    _pattern(
        r"[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
        r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?",
        "a container image reference",
        "nvidia/cuda:12.4.1-devel-ubuntu22.04",
    ),
]
ImageDigest = Annotated[
    str, _pattern(r"sha256:[0-9a-f]{64}", "an image digest", "sha256:" + "0123456789abcdef" * 4)
]
# CUDA compute capabilities without the dot (70 = V100, 80 = A100, 90 = H100), comma-separated.
CudaArchs = Annotated[
    str, _pattern(r"[1-9][0-9]{1,2}(,[1-9][0-9]{1,2})*", "a list of CUDA architectures", "80,90")
]
Capability = Annotated[str, _pattern(r"[A-Z][A-Z_]{1,31}", "a Linux capability", "IPC_LOCK")]
Size = Annotated[str, _pattern(r"[0-9]+[bkmgBKMG]?", "a size", "16g")]
Port = Annotated[int, Field(ge=1, le=65535)]


def _check_cpu_list(value: str) -> str:
    try:
        parse_cpu_list(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; write CPUs and low-high ranges, e.g. 0-3,8") from None
    return value


CpuList = Annotated[
    str,
    _pattern(r"[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*", "a CPU list", "0-3,8"),
    AfterValidator(_check_cpu_list),
]


def _check_address(value: str) -> str:
    """An IPv4 address or a DNS name; IPv6 (and so zone ids) is refused with the reason.

    The management address reaches ``mpirun -H`` (when a node has no fabric address), /etc/hosts,
    known_hosts and ssh config lines: Open MPI cuts host names at the first ``:``, and a zone id
    (``fe80::1%eth0``) may hold any character but ``/`` and ``%`` (line breaks, commas, spaces).
    """
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv4Address):
        return value
    if address is not None:
        raise ValueError(
            f"{shown(value)} is an IPv6 address; clusterctl needs IPv4 management addresses (Open MPI's -H cuts "
            "host names at the first ':', and a zone id can carry any character into /etc/hosts and "
            "ssh config lines); use the node's IPv4 address, e.g. '10.0.0.11', or a hostname such as 'gpu01'"
        )
    if not re.fullmatch(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*", value):
        raise ValueError(
            f"{shown(value)} is neither an IPv4 address nor a hostname; use e.g. '10.0.0.11' or 'gpu01'"
        )
    if _reads_as_ipv4(value):
        raise ValueError(
            f"{shown(value)} is not a dotted-quad IPv4 address, but ssh and mpirun (inet_aton) read it as "
            f"{socket.inet_ntoa(socket.inet_aton(value))} (leading zeros are octal, 0x is hexadecimal, a short "
            "form fills in zeros), so it would bypass the duplicate-address rule and may name another host; "
            "write the address as four decimal numbers without leading zeros, e.g. '10.0.0.2'"
        )
    return value


def _reads_as_ipv4(value: str) -> bool:
    """Whether the C library's ``inet_aton`` (what ssh, getaddrinfo and Open MPI use) reads ``value`` as IPv4."""
    try:
        socket.inet_aton(value)
    except OSError:
        return False
    return True


HostAddress = Annotated[str, AfterValidator(_check_address)]


# Characters no inventory value may hold, by Unicode category: control characters (line breaks, tabs,
# escapes), format characters (zero-width and bidi overrides), surrogates, line and paragraph separators.
# Every string reaches a file line (hosts, known_hosts, ssh config), an argv or a terminal.
_UNSAFE_CATEGORIES = {"Cc": "a control character", "Cf": "an invisible formatting character",
                      "Cs": "a lone surrogate", "Zl": "a line separator", "Zp": "a paragraph separator"}  # fmt: skip


def single_line(value: str) -> str:
    """``value`` unchanged when it is one line of visible text; raises ValueError naming the character."""
    for index, char in enumerate(value):
        what = _UNSAFE_CATEGORIES.get(unicodedata.category(char))
        if what:
            raise ValueError(
                f"{shown(value)} holds {what} (U+{ord(char):04X} at position {index}); every value must be one "
                "line of visible text (it is written into files such as /etc/hosts and into commands); "
                "remove that character"
            )
    return value


def _text_only(value: Any) -> Any:
    """Refuse a non-string where a string-shaped value (address, path) is expected, instead of coercing it."""
    if value is not None and not isinstance(value, str | PurePath | ipaddress.IPv4Interface):
        raise ValueError(
            f"{shown(value)} is a value of type {type(value).__name__}, not text; write the value as a string"
        )
    return value


TextOnly = BeforeValidator(_text_only)


class Strict(BaseModel):
    """Base of every model a person writes: unknown keys are errors, values are not coerced silently.

    ``strict``: ``port: true`` or ``port: "22"`` is refused, not read as 1 or 22. Every string, and every
    string in a list, must be a single line of visible text (``single_line``).
    """

    # defer_build: the validators are built once, for the whole Inventory, on its first validation,
    # instead of once per model at import and again inside every model that nests it (start-up time).
    model_config = ConfigDict(
        extra="forbid", validate_default=True, strict=True, allow_inf_nan=False, defer_build=True
    )

    @field_validator("*", mode="before")
    @classmethod
    def _single_line(cls, value: Any) -> Any:
        """Refuse, before any other check, a string (or a string in a list) that is not one visible line."""
        items = value if isinstance(value, list | tuple) else (value,)
        for item in items:
            if isinstance(item, str):
                single_line(item)
        return value


# --------------------------------------------------------------------------- node parts


class SshSettings(Strict):
    """How clusterctl reaches a node's management address (the admin's access, not the containers')."""

    user: UserName = Field("root", description="Login user on the node.")
    port: Port = Field(22, description="SSH port of the node's sshd.")
    identity_file: LocalPath | None = Field(
        None, description="Private key for the login; default: the SSH agent / ~/.ssh defaults."
    )
    known_hosts: LocalPath | None = Field(
        None,
        description="Extra known_hosts file checked besides the system's (the sandbox writes its own).",
    )
    connect_timeout_s: float = Field(10.0, gt=0, le=300, description="Seconds to wait for a connection.")


class GpuSpec(Strict):
    """The GPUs of a node."""

    count: int = Field(0, ge=0, le=64, description="Number of GPUs; 0 for a CPU-only node.")
    model: str | None = Field(
        None, max_length=64, pattern=r"^[A-Za-z0-9 ._()+-]*$", description="Model, e.g. V100-SXM2-16GB."
    )


class FabricSpec(Strict):
    """The data fabric MPI and NCCL use between nodes."""

    kind: Literal["infiniband", "roce", "ethernet"] = Field(
        "ethernet", description="infiniband or roce enable NCCL's IB transport; ethernet uses sockets."
    )
    interface: InterfaceName = Field("eth0", description="IP interface on the fabric, e.g. ib0 (IPoIB).")
    address: Annotated[ipaddress.IPv4Interface, TextOnly, Field(strict=False)] | None = Field(
        None, description="This node's fabric address in CIDR form, e.g. 192.168.11.1/24."
    )
    hca: list[HcaPort] | None = Field(
        None,
        description="RDMA devices (HCAs) NCCL uses, each optionally with its port: one name (mlx5_0) or a "
        "list, e.g. the 8 compute ConnectX-7 of an HGX H100. Passed as NCCL_IB_HCA with '=' (exact names); "
        "None: NCCL uses every HCA it finds.",
    )
    # 1,600 Gb/s: twice XDR's 800, the fastest InfiniBand port there is.
    rate_gbps: float | None = Field(
        None, gt=0, le=1600, description="Expected link rate in Gb/s, e.g. 100 for EDR, 400 for NDR."
    )
    gid_index: int | None = Field(
        None,
        ge=0,
        le=255,
        description="RoCE only: NCCL_IB_GID_INDEX. None: NCCL (2.21+) picks the GID itself: an IPv4 "
        "(NCCL_IB_ADDR_FAMILY), RoCE v2 (NCCL_IB_ROCE_VERSION_NUM) one; older NCCL uses index 0.",
    )
    traffic_class: int | None = Field(
        None,
        ge=0,
        le=255,
        description="RoCE only: NCCL_IB_TC, the traffic class of NCCL's RDMA packets (the lossless class your "
        "switches give PFC/ECN, e.g. 106). None: NCCL sends with traffic class 0.",
    )

    @field_validator("hca", mode="before")
    @classmethod
    def _one_hca_is_a_list(cls, value: Any) -> Any:
        """A single HCA name (the older inventory form) is a list of one."""
        return [value] if isinstance(value, str) else value

    @field_validator("hca")
    @classmethod
    def _hcas_listed_once(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty HCA list; leave hca out to let NCCL use every HCA, or name them")
        if value and len(set(value)) != len(value):
            raise ValueError(f"{value} names an HCA twice; list each HCA once")
        return value


class NodeDefaults(Strict):
    """Settings every node inherits unless it sets its own (merged key by key)."""

    ssh: SshSettings | None = None
    gpus: GpuSpec | None = None
    fabric: FabricSpec | None = None
    slots: int | None = Field(None, ge=1, le=256, description="MPI ranks per node.")


class Node(Strict):
    """One host of the cluster."""

    name: NodeName = Field(description="Unique name; becomes the hostname MPI sees.")
    address: HostAddress = Field(description="Management address clusterctl reaches over SSH.")
    role: Literal["primary", "secondary"] = Field(
        "secondary", description="Exactly one node is the primary: it runs mpirun."
    )
    ssh: SshSettings = Field(default_factory=SshSettings)
    gpus: GpuSpec = Field(default_factory=GpuSpec)
    fabric: FabricSpec = Field(default_factory=FabricSpec)
    slots: int | None = Field(
        None, ge=1, le=256, description="MPI ranks on this node; default: the GPU count (1 on a CPU node)."
    )
    cpuset: CpuList | None = Field(
        None,
        description="CPUs the benchmark container may use (docker --cpuset-cpus), e.g. 0-3; default: all "
        "of the node's. The sandbox sets each node's share.",
    )

    @property
    def ranks(self) -> int:
        """Ranks this node runs: ``slots`` if set, else its GPU count, else 1."""
        return self.slots or self.gpus.count or 1

    @property
    def cpu_count(self) -> int | None:
        """How many CPUs ``cpuset`` names; None when the container may use all of the node's."""
        return len(parse_cpu_list(self.cpuset)) if self.cpuset else None

    @property
    def fabric_ip(self) -> str:
        """The address MPI and NCCL use for this node: the fabric address, else the management one."""
        return str(self.fabric.address.ip) if self.fabric.address else self.address

    @property
    def rdma(self) -> bool:
        """Whether the node's fabric carries RDMA (InfiniBand or RoCE)."""
        return self.fabric.kind in ("infiniband", "roce")


# --------------------------------------------------------------------------- cluster-wide parts


class Mount(Strict):
    """A bind mount into the benchmark container."""

    source: ListPath = Field(description="Absolute path on the node (no ',' or ':').")
    target: ListPath = Field(description="Absolute path in the container (no ',' or ':').")
    read_only: bool = Field(False, description="Mount read-only.")


class ContainerSpec(Strict):
    """The benchmark container started on every node."""

    image: ImageRef | None = Field(
        None, description="Image to run; default: the image `clusterctl image build` made for this inventory."
    )
    sshd_port: Port = Field(50000, description="Port the container's sshd listens on (host network).")
    shm_size: Size = Field("1g", description="Size of /dev/shm in the container.")
    mounts: list[Mount] = Field(default_factory=list, description="Data set and benchmark mounts.")
    devices: list[ListPath] = Field(
        default_factory=list, description="Extra device paths to pass through (absolute, no ',' or ':')."
    )
    cap_add: list[Capability] = Field(default_factory=list, description="Extra capabilities.")
    privileged: bool = Field(False, description="Run privileged (off by default; rarely needed).")


Profile = Literal["paper-2020", "modern", "cpu"]


class ImageVersions(Strict):
    """Software versions baked into the benchmark image. Unset fields take the profile's defaults."""

    os_base: Version | None = Field(None, description="OS of the base image, e.g. ubuntu18.04.")
    cuda: Version | None = Field(None, description="CUDA version (GPU profiles).")
    mofed: Version | None = Field(
        None, description="MLNX OFED user space; must match the hosts' driver. None: distro rdma-core."
    )
    openmpi: Version | None = Field(None, description="Open MPI version built from source; None: distro's.")
    nccl: Version | None = Field(
        None,
        description="NCCL version pinned from NVIDIA's CUDA apt repository (TensorFlow images); None: the base "
        "image's. PyTorch images use the NCCL wheel their torch pins and refuse this field.",
    )
    cudnn: Version | None = Field(
        None,
        description="cuDNN version pinned from NVIDIA's CUDA apt repository, e.g. 7.6.5.32 (TensorFlow images); "
        "None: the base image's. PyTorch images use the cuDNN wheel their torch pins and refuse this field.",
    )
    cuda_archs: CudaArchs | None = Field(
        None,
        description="Compute capabilities nccl-tests is compiled for, e.g. 70,80,90 (V100, A100, H100); "
        "None: nccl-tests' own default list.",
    )
    framework: Literal["tensorflow", "pytorch"] | None = Field(None, description="Deep-learning framework.")
    framework_version: Version | None = Field(None, description="Framework version.")
    horovod: Version | None = Field(None, description="Horovod version; None: no Horovod.")
    python: Version | None = Field(None, description="Python version of the image.")
    nccl_tests: Version | None = Field(
        None, description="nccl-tests git tag built with MPI; None: not built."
    )
    tf_benchmarks_branch: Version | None = Field(None, description="tensorflow/benchmarks branch.")


class ImageSpec(Strict):
    """How the benchmark image is built."""

    profile: Profile = Field("cpu", description="paper-2020 (the whitepaper's stack), modern or cpu.")
    base: ImageRef | None = Field(
        None,
        description="Base image; default: the profile's. The way to build from a registry mirror or from a copy "
        "loaded with `docker load` (the paper-2020 base is gone from public registries).",
    )
    base_digest: ImageDigest | None = Field(
        None,
        description="Digest the base image is pinned to (sha256:...), so a moved tag cannot change the build; "
        "the digest of a registry image (`docker buildx imagetools inspect`). Not together with a base that "
        "already ends in @sha256:...",
    )
    versions: ImageVersions = Field(default_factory=ImageVersions)
    wheelhouse: LocalPath | None = Field(
        None, description="Directory of wheels installed with pip --no-index (cpu profile: PyTorch, Horovod)."
    )

    @model_validator(mode="after")
    def _one_digest_and_one_nccl(self) -> ImageSpec:
        """A digest given once; no apt NCCL/cuDNN pin on a PyTorch image (torch's wheels bring their own)."""
        if self.base_digest and self.base and "@" in self.base:
            raise ValueError(
                f"image.base {self.base} already names a digest and image.base_digest gives another; "
                "keep the digest in one place (drop image.base_digest, or the @sha256:... part of image.base)"
            )
        pinned = [name for name in ("nccl", "cudnn") if getattr(self.versions, name)]
        if self.versions.framework == "pytorch" and pinned:
            fields = " and ".join(f"image.versions.{name}" for name in pinned)
            raise ValueError(
                f"{fields} cannot be pinned on a PyTorch image: DDP, Horovod and nccl-tests all use the "
                f"NCCL and cuDNN wheels that torch {self.versions.framework_version} pins, so the image has one "
                f"of each; remove {fields}, or choose the torch version (image.versions.framework_version) "
                "whose libraries you want"
            )
        return self

    @property
    def from_image(self) -> str | None:
        """The reference the Dockerfile's FROM names: the base, pinned to ``base_digest`` when one is given."""
        if self.base and self.base_digest:
            return f"{self.base}@{self.base_digest}"
        return self.base


class RunDefaults(Strict):
    """Defaults for `clusterctl run`; command-line options override them."""

    framework: Literal["horovod", "ddp"] = Field("horovod", description="Data-parallel library.")
    batch_size: int = Field(64, ge=1, le=4096, description="Batch size per device.")
    precision: Literal["fp32", "fp16", "bf16"] = Field("fp32", description="Training precision.")
    xla: bool = Field(False, description="Kernel fusion: XLA (TensorFlow) or torch.compile (PyTorch).")
    data_format: Literal["NCHW", "NHWC"] = Field("NCHW", description="Memory layout (NHWC = channels-last).")
    optimizer: Literal["sgd", "momentum"] = Field("sgd", description="Optimizer.")
    # Bounds: a million steps is days of training on any device; a larger count is a typo that never ends.
    warmup_steps: int = Field(10, ge=0, le=1_000_000, description="Steps run before measuring.")
    steps: int = Field(100, ge=1, le=1_000_000, description="Measured steps.")
    image_size: int = Field(224, ge=32, le=1024, description="Synthetic image side in pixels.")
    gdr_level: int | None = Field(
        None, ge=0, le=5, description="NCCL_NET_GDR_LEVEL for GPUDirect RDMA; None: NCCL's default."
    )
    data_dir: SafePath | None = Field(
        None, description="Data set path in the container; None: synthetic data."
    )
    display_every: int = Field(10, ge=1, le=1_000_000, description="Print throughput every N steps.")
    fp16_allreduce: bool = Field(
        False,
        description="Horovod only: compress gradients to fp16 for the allreduce (half the bytes on the "
        "fabric; meant for mixed precision). DDP ignores it.",
    )
    bucket_cap_mb: float = Field(
        25.0, gt=0, le=1024, description="DDP only: gradient bucket size in MB (torch's default 25)."
    )


class ProvisionSpec(Strict):
    """Settings of `clusterctl provision` that are not facts about a node."""

    host_os: Version | None = Field(
        None,
        description="The hosts' OS as MLNX OFED names it, e.g. ubuntu18.04; default: the image's os_base.",
    )
    mofed_url: Annotated[str, Field(pattern=r"^(https?|file)://[A-Za-z0-9._~:/?#@!$&()*+,;=%-]+$")] | None = (
        Field(
            None,
            description="MLNX OFED tarball (https:// or file:// on the node; old download links disappear, so "
            "a local mirror is supported). Default: Mellanox's URL for the version and host_os. "
            "Not together with mofed_tarball_path.",
        )
    )
    mofed_tarball_path: Annotated[Path, TextOnly, Field(strict=False)] | None = Field(
        None,
        description="MLNX OFED tarball on the controller (the machine running clusterctl), pushed to each "
        "node over SFTP when its MOFED probe fails, then installed from there (for nodes without internet "
        "access). A relative path is resolved against the inventory file's directory; the file must exist "
        "when the inventory is loaded. Not together with mofed_url.",
    )

    @field_validator("mofed_tarball_path")
    @classmethod
    def _tarball_is_a_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        """Resolve the path against the inventory's directory (``context["inventory_dir"]``) and require a file."""
        if value is None:
            return None
        base = Path((info.context or {}).get("inventory_dir") or ".")
        try:
            path = (base / value.expanduser()).resolve()
            kind = (
                "file" if path.is_file() else "dir" if path.is_dir() else "other" if path.exists() else None
            )
        except RuntimeError:  # ~nosuchuser
            raise ValueError(
                f"{shown(str(value))} starts with a home directory (~user) that does not exist on this machine; "
                "write the path in full or relative to the inventory file"
            ) from None
        except OSError as exc:  # a name or path too long, a loop of symlinks
            raise ValueError(
                f"{shown(str(value))} cannot be looked up ({exc.strerror}); shorten or correct the path"
            ) from None
        described = shown(str(value)) + (f" (resolved to {path})" if str(path) != str(value) else "")
        if kind == "file":
            return path
        if kind == "dir":
            problem, fix = "is a directory, not a tarball", "name the MLNX_OFED_LINUX-*.tgz file itself"
        elif kind == "other":
            problem, fix = "is not a regular file", "name the MLNX_OFED_LINUX-*.tgz file itself"
        else:
            problem = "does not exist"
            fix = (
                "put the MLNX OFED tarball there or correct the path "
                "(a relative path is resolved against the inventory file's directory)"
            )
        raise ValueError(f"{described} {problem}; {fix}")

    def mofed_download_url(self, versions: ImageVersions) -> str | None:
        """The URL the nodes download the MLNX OFED tarball from.

        ``mofed_url`` when set, else Mellanox's URL for the version and OS. None when
        ``mofed_tarball_path`` pushes the tarball instead, or when no MOFED version is set.
        """
        if self.mofed_tarball_path:
            return None
        if self.mofed_url:
            return self.mofed_url
        if not versions.mofed:
            return None
        os_name = self.host_os or versions.os_base
        return (
            f"https://content.mellanox.com/ofed/MLNX_OFED-{versions.mofed}/"
            f"MLNX_OFED_LINUX-{versions.mofed}-{os_name}-x86_64.tgz"
        )


class PreflightSpec(Strict):
    """What `clusterctl run --preflight` requires of the fabric before it runs a model."""

    min_bus_bandwidth_gb_s: float | None = Field(
        None,
        gt=0,
        description="Least bus bandwidth (GB/s, nccl-tests' busbw of the largest message) the collective "
        "benchmark (nccl-tests on GPUs, allreduce on CPUs) must reach on the run's nodes, or the model run "
        "is refused. None: the benchmark runs and is recorded, nothing is refused.",
    )


# --------------------------------------------------------------------------- the Slurm launcher

# Partition, account, QOS, reservation names: what Slurm's own names look like.
SlurmName = Annotated[str, _pattern(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}", "a Slurm name", "gpu")]
# Slurm hostlist expressions: gpu[01-04],login1.
SlurmHostlist = Annotated[
    str,
    _pattern(
        r"[A-Za-z0-9_.-]+(\[[0-9,-]+\])?(,[A-Za-z0-9_.-]+(\[[0-9,-]+\])?)*", "a Slurm hostlist", "gpu[01-04]"
    ),
]
# Node features with Slurm's operators (& and | ! , * [ ] :), e.g. "h100&ib".
SlurmConstraint = Annotated[
    str, _pattern(r"[A-Za-z0-9_.&|!,:*\[\]-]{1,128}", "a Slurm constraint", "h100&ib")
]
# sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
SlurmTime = Annotated[
    str,
    _pattern(
        r"[0-9]{1,6}(:[0-9]{2}){0,2}|[0-9]{1,3}-[0-9]{1,2}(:[0-9]{2}){0,2}", "a Slurm time limit", "02:00:00"
    ),
]
# A container image as pyxis (enroot URI, squashfs path), apptainer (.sif path) or docker names it.
ContainerImage = Annotated[
    str,
    _pattern(
        r"[A-Za-z0-9_./][A-Za-z0-9_./:@#+=,-]{0,255}", "a container image", "nvcr.io#nvidia/pytorch:24.01-py3"
    ),
]
# An extra sbatch option: --name or --name=value, nothing a shell or sbatch's parser would split.
SbatchOption = Annotated[
    str,
    _pattern(
        r"--[a-z][a-z0-9-]{0,40}(=[A-Za-z0-9_.,:/@+%=\[\]-]{1,200})?", "an sbatch option", "--mail-type=END"
    ),
]
# Options the batch script sets itself from the inventory and the plan; an extra line may not repeat them.
SBATCH_MANAGED = ("job-name", "output", "error", "nodes", "ntasks", "ntasks-per-node", "partition", "account",
                  "reservation", "qos", "time", "nodelist", "constraint", "gpus-per-node", "exclusive", "chdir",
                  "wait", "parsable")  # fmt: skip
# Options that undo or contradict the managed ones, each with what it breaks.
SBATCH_CONTRADICTING = {
    "oversubscribe": "it lets other jobs share the nodes that --exclusive (slurm.exclusive) reserves",
    "share": "it is the old name of --oversubscribe, which undoes --exclusive (slurm.exclusive)",
    "nodefile": "it replaces the node list clusterctl sets (slurm.nodelist)",
    "gpus": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "gpus-per-task": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "gpus-per-socket": "it asks for GPUs besides the --gpus-per-node clusterctl sets (slurm.gpus_per_node)",
    "ntasks-per-gpu": "it changes the ranks per node clusterctl sets from the run's devices",
    "array": "it submits many jobs where clusterctl follows one",
    "wrap": "it replaces the batch script clusterctl writes",
    "test-only": "sbatch then submits nothing and prints no job id to follow",
}


def sbatch_option_problem(option: str) -> str | None:
    """Why the extra sbatch ``option`` (``--name[=value]``) is refused, or None when it may be added.

    sbatch reads long options with getopt_long, which takes any unambiguous prefix of a name as the
    name (``--out=`` is ``--output=``) and an ambiguous one as an error, so a name that is a prefix of a
    managed or contradicting option is refused like the option itself (none of sbatch's own options is
    a strict prefix of one of those: an exact name would win over the prefix rule).
    """
    name = option[2:].split("=", 1)[0]
    watched = [*SBATCH_MANAGED, *SBATCH_CONTRADICTING]
    meant = name if name in watched else next((w for w in watched if w.startswith(name)), None)
    if meant is None:
        return None
    spelled = f"--{name}" + (
        "" if meant == name else f" (sbatch reads a prefix as the option it starts: --{meant})"
    )
    if meant in SBATCH_MANAGED:
        return (
            f"{option!r} sets {spelled}, which clusterctl sets from the slurm block and the run; "
            "use the slurm block's field (or the run's options) instead"
        )
    return f"{option!r} sets {spelled}: {SBATCH_CONTRADICTING[meant]}; remove it"


class SlurmLogin(Strict):
    """The login node clusterctl submits from, reached over SSH like any node (host key verified)."""

    address: HostAddress = Field(description="Address of the login node.")
    ssh: SshSettings = Field(default_factory=SshSettings)


class SlurmSpec(Strict):
    """Run through an existing Slurm: `sbatch` on the login node, ranks started by `srun --mpi=...`."""

    default: bool = Field(True, description="`run` uses the slurm launcher unless given --launcher ssh.")
    login: SlurmLogin
    run_dir: SafePath = Field(
        description="Absolute directory on storage the login node and the batch host share: each run's "
        "batch script and output go in a subdirectory."
    )
    runtime: Literal["pyxis", "apptainer", "none", "docker"] = Field(
        description="How each rank runs: pyxis (--container-image), apptainer (apptainer exec --nv), none (on "
        "the host itself), docker (docker run per task; the sandbox's)."
    )
    image: ContainerImage | None = Field(
        None,
        description="pyxis: an enroot image (nvcr.io#nvidia/pytorch:24.01-py3 or a .sqsh path); apptainer: a .sif "
        "path (required); docker: default the image `clusterctl image build` made. Unused with none.",
    )
    partition: SlurmName | None = Field(None, description="Partition (--partition); None: the default one.")
    account: SlurmName | None = Field(None, description="Account charged (--account).")
    reservation: SlurmName | None = Field(None, description="Reservation (--reservation).")
    qos: SlurmName | None = Field(None, description="Quality of service (--qos).")
    time_limit: SlurmTime | None = Field(None, description="Wall-time limit (--time), e.g. 01:00:00.")
    nodelist: SlurmHostlist | None = Field(None, description="Nodes to run on (--nodelist), e.g. gpu[01-04].")
    constraint: SlurmConstraint | None = Field(
        None, description="Node features (--constraint), e.g. h100&ib."
    )
    gpus_per_node: int | None = Field(
        None,
        ge=0,
        le=64,
        description="--gpus-per-node; None: the nodes' GPU count (none asked on CPU nodes).",
    )
    exclusive: bool = Field(True, description="Whole nodes (--exclusive): nothing else shares the fabric.")
    mpi: SlurmName = Field(
        "pmix", description="srun's MPI plugin (--mpi); checked against `srun --mpi=list`."
    )
    pending_limit_s: float = Field(
        3600, gt=0, le=7 * 86400, description="Seconds a job may stay PENDING before it is cancelled."
    )
    extra_sbatch: list[SbatchOption] = Field(
        default_factory=list,
        description="More #SBATCH options, each --name or --name=value (e.g. --mail-type=END); not one the "
        "fields above set.",
    )

    @field_validator("run_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute path; use a directory such as /shared/clusterctl")
        return value

    @field_validator("extra_sbatch")
    @classmethod
    def _not_managed(cls, value: list[str]) -> list[str]:
        for option in value:
            problem = sbatch_option_problem(option)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _apptainer_image(self) -> SlurmSpec:
        if self.runtime == "apptainer" and not self.image:
            raise ValueError(
                "runtime apptainer needs image, the .sif file; set slurm.image: /shared/bench.sif"
            )
        return self


class RegistrySpec(Strict):
    """The image registry clusterctl runs for the length of one `image push`: on the controller, or on a node."""

    address: HostAddress | None = Field(
        None,
        description="Address (IPv4 or DNS name) at which the nodes reach the controller; the registry runs on "
        "the controller, listens there, and its TLS certificate names it. Not together with node.",
    )
    node: NodeName | None = Field(
        None,
        description="Run the registry on this inventory node instead of the controller (e.g. the node that "
        "builds the image, `image build --builder`). It listens on the node's management address "
        "(nodes[].address: the controller pushes there, the other nodes pull from there), keeps its blobs "
        "in the node's /var/lib/clusterctl/registry/<cluster>, and needs the docker-registry package there "
        "(provision installs it). Not together with address.",
    )
    port: Port = Field(5443, description="TCP port of the registry (TLS).")

    @model_validator(mode="after")
    def _one_place(self) -> RegistrySpec:
        if self.address is not None and self.node is not None:
            raise ValueError(
                f"both address ({self.address}) and node ({self.node}) are set; keep address to run the "
                "registry on the controller, or node to run it on that node (at the node's address)"
            )
        return self


class StreamSpec(Strict):
    """How the stream transport sends the image."""

    compression: Literal["auto", "none"] = Field(
        "auto",
        description="auto: zstd-compress the stream to every node that has zstd (the others get it plain); "
        "none: always plain.",
    )


class DeliverySpec(Strict):
    """How `image push` brings the built image to the nodes."""

    transport: Literal["registry", "stream"] = Field(
        "stream",
        description="registry: push once to a TLS registry on the controller (or the node registry.node names), "
        "every node pulls only the layers it lacks (provision installs the registry's CA on each node). "
        "stream: docker save into docker load over SSH, the whole image to each node (for nodes that cannot "
        "reach the registry).",
    )
    registry: RegistrySpec = Field(default_factory=RegistrySpec)
    stream: StreamSpec = Field(default_factory=StreamSpec)

    @model_validator(mode="after")
    def _registry_has_an_address(self) -> DeliverySpec:
        if self.transport == "registry" and self.registry.address is None and self.registry.node is None:
            raise ValueError(
                "transport registry needs registry.address or registry.node; set address to the controller's "
                "address as the nodes reach it (e.g. registry: {address: 10.0.0.1}), or node to the inventory "
                "node that runs the registry (e.g. registry: {node: node1}), or set transport: stream"
            )
        return self


class StateSpec(Strict):
    """What clusterctl keeps in the cluster's state directory (``<state dir>/clusters/<cluster>/``)."""

    keep_bundles: int = Field(
        10,
        ge=1,
        le=10_000,
        description="How many of provision's status bundles (status/<UTC time>/) to keep; the oldest beyond "
        "this are removed after each provision. Only directories clusterctl named are ever removed.",
    )


class Cluster(Strict):
    """The cluster's name and the defaults its nodes inherit."""

    name: NodeName = Field(description="Cluster name; used in container names, labels and state paths.")
    defaults: NodeDefaults = Field(default_factory=NodeDefaults)


class Inventory(Strict):
    """A whole inventory file."""

    cluster: Cluster
    nodes: list[Node] = Field(min_length=1, description="The hosts; exactly one has role: primary.")
    container: ContainerSpec = Field(default_factory=ContainerSpec)
    image: ImageSpec = Field(default_factory=ImageSpec)
    run: RunDefaults = Field(default_factory=RunDefaults)
    provision: ProvisionSpec = Field(default_factory=ProvisionSpec)
    preflight: PreflightSpec = Field(default_factory=PreflightSpec)
    slurm: SlurmSpec | None = Field(
        None, description="Run through Slurm (the slurm launcher); None: ssh only."
    )
    delivery: DeliverySpec = Field(default_factory=DeliverySpec)
    state: StateSpec = Field(default_factory=StateSpec)

    _source: Path | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _inherit_defaults(cls, data: Any) -> Any:
        """Merge ``cluster.defaults`` into every node, key by key, before the nodes are validated."""
        if not isinstance(data, dict):
            return data
        cluster = data.get("cluster")
        nodes = data.get("nodes")
        defaults = cluster.get("defaults") if isinstance(cluster, dict) else None
        if not isinstance(defaults, dict) or not isinstance(nodes, list):
            return data
        merged_nodes = []
        for node in nodes:
            if not isinstance(node, dict):
                merged_nodes.append(node)
                continue
            merged = dict(node)
            for key, value in defaults.items():
                if key not in merged:
                    merged[key] = value
                elif isinstance(value, dict) and isinstance(merged[key], dict):
                    merged[key] = {**value, **merged[key]}
            merged_nodes.append(merged)
        return {**data, "nodes": merged_nodes}

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        """Fill the image's unset versions and base from its profile's defaults."""
        if isinstance(data, dict):
            return {**data, "image": apply_profile_defaults(data.get("image"))}
        return data

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Inventory:
        problems = cross_field_problems(self)
        if problems:
            raise InventoryRuleError(problems)
        return self

    @property
    def primary(self) -> Node:
        """The node that runs mpirun."""
        return next(n for n in self.nodes if n.role == "primary")

    @property
    def secondaries(self) -> list[Node]:
        """Every node but the primary, in file order."""
        return [n for n in self.nodes if n.role != "primary"]

    @property
    def source(self) -> Path | None:
        """The file this inventory was loaded from, if any."""
        return self._source

    def node(self, name: str) -> Node:
        """The node called ``name``; raises InventoryError naming the known nodes otherwise."""
        for n in self.nodes:
            if n.name == name:
                return n
        known = ", ".join(n.name for n in self.nodes)
        raise InventoryError(f"no node named {name!r} in the inventory (nodes: {known}).")

    @property
    def registry_node(self) -> Node | None:
        """The node that runs the cluster's registry (``delivery.registry.node``); None: the controller."""
        name = self.delivery.registry.node
        return None if name is None else self.node(name)

    @property
    def registry_address(self) -> str | None:
        """Where the cluster's registry listens and what its certificate names: ``delivery.registry.address``,
        or the management address of ``delivery.registry.node``; None when the inventory names no registry."""
        host = self.registry_node
        return host.address if host is not None else self.delivery.registry.address

    @property
    def registry_endpoint(self) -> str:
        """``address:port``, the registry's name in image references and in /etc/docker/certs.d."""
        return f"{self.registry_address}:{self.delivery.registry.port}"


# --------------------------------------------------------------------------- cross-field rules

Loc = tuple[str | int, ...]


class InventoryRuleError(Exception):
    """Raised from validation for rules that span fields; carries (location, message) pairs.

    Not a ValueError on purpose: pydantic passes it through untouched, keeping the locations.
    """

    def __init__(self, problems: list[tuple[Loc, str]]):
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


def cross_field_problems(inv: Inventory) -> list[tuple[Loc, str]]:
    """Every rule that spans fields, as (location, message-with-fix) pairs. Empty when all hold."""
    problems: list[tuple[Loc, str]] = []
    seen_names: dict[str, int] = {}
    seen_addresses: dict[str, int] = {}
    for i, node in enumerate(inv.nodes):
        if node.name in seen_names:
            problems.append(
                (
                    (("nodes", i, "name")),
                    f"duplicate node name {node.name!r} (also nodes[{seen_names[node.name]}]); give every node a unique name",
                )
            )
        seen_names.setdefault(node.name, i)
        address = node.address.lower()  # DNS names are case-insensitive: GPU01 and gpu01 are one host
        if address in seen_addresses:
            problems.append(
                (
                    ("nodes", i, "address"),
                    f"duplicate address {node.address!r} (also nodes[{seen_addresses[address]}], names compared "
                    "ignoring case); every node needs its own management address",
                )
            )
        seen_addresses.setdefault(address, i)
        if node.gpus.count and node.slots and node.slots > node.gpus.count:
            problems.append(
                (
                    ("nodes", i, "slots"),
                    f"slots {node.slots} > {node.gpus.count} GPUs on {node.name}; set slots to at most the GPU count (one rank per GPU)",
                )
            )
        if node.rdma and node.fabric.address is None:
            problems.append(
                (
                    ("nodes", i, "fabric", "address"),
                    f"{node.name} has a {node.fabric.kind} fabric but no fabric address; add e.g. address: 192.168.11.{i + 1}/24",
                )
            )

    primaries = [i for i, n in enumerate(inv.nodes) if n.role == "primary"]
    if not primaries:
        problems.append(
            (
                ("nodes",),
                "no node has role: primary; mark exactly one node (the one that runs mpirun) with role: primary",
            )
        )
    for i in primaries[1:]:
        problems.append(
            (
                ("nodes", i, "role"),
                f"a second primary ({inv.nodes[primaries[0]].name} is already primary); set role: secondary on all nodes but one",
            )
        )

    fabric_nodes = [(i, n) for i, n in enumerate(inv.nodes) if n.fabric.address is not None]
    if fabric_nodes:
        first = fabric_nodes[0][1]
        network = first.fabric.address.network  # type: ignore[union-attr]
        seen_ips: dict[str, int] = {}
        for i, node in fabric_nodes:
            addr = node.fabric.address
            assert addr is not None
            if addr.network != network:
                problems.append(
                    (
                        ("nodes", i, "fabric", "address"),
                        f"{addr} is not in the subnet {network} of {first.name}; put every fabric address in one subnet",
                    )
                )
            ip = str(addr.ip)
            if ip in seen_ips:
                problems.append(
                    (
                        ("nodes", i, "fabric", "address"),
                        f"duplicate fabric address {ip} (also nodes[{seen_ips[ip]}]); give every node its own",
                    )
                )
            seen_ips.setdefault(ip, i)
    kinds = {n.fabric.kind for n in inv.nodes}
    if len(kinds) > 1:
        problems.append(
            (("nodes",), f"nodes mix fabric kinds {sorted(kinds)}; use one fabric kind for the whole cluster")
        )
    problems += _per_rank_fabric_problems(inv)
    if inv.provision.mofed_url and inv.provision.mofed_tarball_path:
        problems.append(
            (
                ("provision", "mofed_tarball_path"),
                "both provision.mofed_url and provision.mofed_tarball_path are set; keep one of them "
                "(mofed_url: the nodes download the tarball, mofed_tarball_path: clusterctl pushes it from this machine)",
            )
        )
    registry_node = inv.delivery.registry.node
    if registry_node is not None and registry_node not in seen_names:
        problems.append(
            (
                ("delivery", "registry", "node"),
                f"{registry_node!r} is not a node of this inventory (nodes: {', '.join(seen_names)}); name "
                "the node that runs the registry, or use registry.address to run it on the controller",
            )
        )
    seen_targets: set[str] = set()
    for j, mount in enumerate(inv.container.mounts):
        target = mount.target
        if target in seen_targets:
            problems.append(
                (
                    ("container", "mounts", j, "target"),
                    f"two mounts share the target {target}; give each its own container path",
                )
            )
        seen_targets.add(target)
    return problems


# Fabric settings mpirun passes to every rank as one value (-mca ..._if_include, -x NCCL_*): a node
# whose value differs from the primary's would be told the primary's and fail or use the wrong device.
_SAME_ON_EVERY_NODE = {
    "interface": "rename the interface on that node (a udev rule or systemd .link file) or use a name every "
    "node has",
    "hca": "give every node the same HCA list (NCCL pairs HCAs by name and position across nodes)",
    "gid_index": "use one GID index on every node (show_gids lists them)",
    "traffic_class": "use one traffic class on every node",
}


def _per_rank_fabric_problems(inv: Inventory) -> list[tuple[Loc, str]]:
    """RoCE settings on a node that is not RoCE; nodes whose fabric interface, HCAs or RoCE settings
    differ from the primary's."""
    primaries = [n for n in inv.nodes if n.role == "primary"]
    if not primaries:
        return []
    reference = primaries[0]
    problems: list[tuple[Loc, str]] = []
    for i, node in enumerate(inv.nodes):
        for field in ("gid_index", "traffic_class"):
            if getattr(node.fabric, field) is not None and node.fabric.kind != "roce":
                problems.append(
                    (
                        ("nodes", i, "fabric", field),
                        f"{node.name} sets fabric.{field} but its fabric is {node.fabric.kind}; NCCL applies "
                        "it to RoCE only, so remove it or set kind: roce",
                    )
                )
    for field, fix in _SAME_ON_EVERY_NODE.items():
        want = getattr(reference.fabric, field)
        for i, node in enumerate(inv.nodes):
            got = getattr(node.fabric, field)
            if got != want:
                problems.append(
                    (
                        ("nodes", i, "fabric", field),
                        f"{node.name} has fabric.{field} {got!r} but the primary {reference.name} has {want!r}; "
                        f"mpirun gives every rank one value, so {fix}",
                    )
                )
    return problems


# --------------------------------------------------------------------------- loading


_HINTS = {
    "extra_forbidden": "remove the key or correct its spelling (`clusterctl inventory schema` lists the allowed keys)",
    "missing": "add this field",
    "literal_error": "use one of the allowed values",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "greater_than": "use a larger value",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "too_short": "add at least one entry",
    "ip_v4_interface": "write an IPv4 address with its prefix, e.g. 192.168.11.1/24",
    "less_than": "use a smaller value",
    "int_from_float": "write a whole number",
    "float_type": "write a number",
    "float_parsing": "write a number",
    "finite_number": "write a finite number (not .nan or .inf)",
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "string_type": "write the value as text (in quotes if YAML would read it as a number or boolean)",
    "string_pattern_mismatch": "use only the characters the pattern allows",
    "string_too_long": "shorten the value",
    "too_long": "remove entries",
    "list_type": "write a list (one '- item' line per entry)",
    "dict_type": "write a mapping (one 'key: value' line per entry)",
    "model_type": "write a mapping (one 'key: value' line per entry)",
}
# The hint of an error type not listed above.
_DEFAULT_HINT = "correct the value (`clusterctl inventory schema` describes every field)"
# Problems listed in one message; the rest are counted (a file with 10,000 bad entries stays readable).
MAX_PROBLEMS_SHOWN = 20


def format_loc(loc: Sequence[str | int]) -> str:
    """``("nodes", 1, "fabric")`` as ``nodes[1].fabric``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:  # a key the user wrote may hold anything: quote it unless it is a plain word
            name = part if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", part) else shown(part)
            out += f".{name}" if out else name
    return out or "(top level)"


def _has_path(document: Any, loc: Loc) -> bool:
    node = document
    for key in loc:
        in_map = isinstance(node, dict) and isinstance(key, str) and key in node
        in_list = isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)
        if not (in_map or in_list):
            return False
        node = node[key]
    return True


def _locate(document: Any, loc: Loc) -> tuple[Loc, int | None]:
    """Where to point the user: a node value inherited from ``cluster.defaults`` points there."""
    if len(loc) >= 3 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = document.get("nodes") if isinstance(document, dict) else None
        node = nodes[loc[1]] if isinstance(nodes, list) and loc[1] < len(nodes) else None
        defaults_loc: Loc = ("cluster", "defaults", *loc[2:])
        if isinstance(node, dict) and not _has_path(node, loc[2:]) and _has_path(document, defaults_loc):
            return defaults_loc, line_of(document, defaults_loc)
    return loc, line_of(document, loc)


def _message(path: Path, document: Any, loc: Loc, msg: str, hint: str | None) -> str:
    if hint is None and "; " in msg:  # rule messages read "what is wrong; what to do"
        msg, hint = msg.rsplit("; ", 1)
    where_loc, line = _locate(document, loc)
    where = f"{path}, line {line}" if line else str(path)
    return f"{where}, field {format_loc(where_loc)}: {msg}. Fix: {hint or _DEFAULT_HINT}."


def _problems_error(lines: list[str]) -> InventoryError:
    """One error listing each distinct problem once (a bad inherited default is named once, not per node)."""
    distinct = list(dict.fromkeys(lines))
    shown_lines = distinct[:MAX_PROBLEMS_SHOWN]
    if len(distinct) > MAX_PROBLEMS_SHOWN:
        shown_lines.append(f"... and {len(distinct) - MAX_PROBLEMS_SHOWN} more problems like these.")
    return InventoryError("\n".join(shown_lines))


def validate_document(document: Any, path: Path) -> Inventory:
    """Validate a parsed YAML document as an inventory from ``path``.

    Relative controller paths in it (``provision.mofed_tarball_path``) are resolved against ``path``'s
    directory.

    Raises:
        InventoryError: with one line per problem, each naming file, line, field and fix.
    """
    if not isinstance(document, dict):
        raise InventoryError(
            f"{path}: not an inventory (the document is {type(document).__name__}, not a mapping). Fix: write a "
            "mapping with the keys cluster and nodes (and optionally container, image, run, provision); "
            "inventories/sandbox-example.yml shows one."
        )
    try:
        inventory = Inventory.model_validate(document, context={"inventory_dir": path.parent})
    except InventoryRuleError as exc:
        lines = [_message(path, document, loc, msg, None) for loc, msg in exc.problems]
        raise _problems_error(lines) from None
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False, include_input=False):
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(_message(path, document, tuple(err["loc"]), msg, _HINTS.get(err["type"])))
        raise _problems_error(lines) from None
    inventory._source = path
    return inventory


def load_inventory(path: Path | str) -> Inventory:
    """Read and validate the inventory at ``path``.

    Raises:
        InputError: the file is missing or not YAML.
        InventoryError: the content does not validate; the message names file, line, field and fix.
    """
    path = Path(path)
    return validate_document(load_yaml(path), path)


def inventory_schema() -> dict[str, Any]:
    """The JSON schema of the inventory format, for editors and for documentation."""
    return Inventory.model_json_schema()
