"""The inventory's models: one YAML file describing the cluster, validated once at load by pydantic v2.

Every string that will later reach a shell is one of the checked value types (``inventory.types``).
Unknown keys are errors everywhere. Nodes inherit ``cluster.defaults`` key by key and the image its
profile's defaults before validation; after it, loading runs the cross-field rules (``inventory.rules``,
which name these models: the models do not import them).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from clusterctl.errors import InventoryError
from clusterctl.inventory.profiles import apply_profile_defaults
from clusterctl.inventory.types import (
    Capability,
    ContainerImage,
    CpuList,
    CudaArchs,
    GptSize,
    HcaPort,
    HostAddress,
    ImageDigest,
    ImageRef,
    InterfaceName,
    ListPath,
    LocalPath,
    NodeName,
    Port,
    SafePath,
    SbatchOption,
    Size,
    SlurmConstraint,
    SlurmHostlist,
    SlurmName,
    SlurmTime,
    TextOnly,
    UserName,
    Version,
    parse_cpu_list,
    sbatch_option_problem,
    shown,
    single_line,
)


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
    dali: Version | None = Field(
        None,
        description="NVIDIA DALI version (PyPI's nvidia-dali-cuda<CUDA major>0) for resnet50's GPU input "
        "pipeline (modern profile); None: no DALI, Pillow decodes.",
    )


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

    framework: Literal["horovod", "ddp", "fsdp"] = Field(
        "horovod",
        description="Data-parallel library; fsdp (PyTorch's fully_shard) for the gpt workload only.",
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Batch size per device.")
    precision: Literal["fp32", "fp16", "bf16"] = Field("fp32", description="Training precision.")
    xla: bool = Field(False, description="Kernel fusion: XLA (TensorFlow) or torch.compile (PyTorch).")
    data_format: Literal["NCHW", "NHWC"] = Field("NCHW", description="Memory layout (NHWC = channels-last).")
    optimizer: Literal["sgd", "momentum"] = Field("sgd", description="Optimizer.")
    # Bounds: a million steps is days of training on any device; a larger count is a typo that never ends.
    warmup_steps: int = Field(10, ge=0, le=1_000_000, description="Steps run before measuring.")
    steps: int = Field(100, ge=1, le=1_000_000, description="Measured steps.")
    trace: bool = Field(
        False,
        description="Keep a trace of a few steps per rank in the run directory's trace/ (run --trace): "
        "torch.profiler's Chrome trace per rank, and Horovod's timeline; workloads that train only.",
    )
    image_size: int = Field(224, ge=32, le=1024, description="Synthetic image side in pixels.")
    gdr_level: int | None = Field(
        None, ge=0, le=5, description="NCCL_NET_GDR_LEVEL for GPUDirect RDMA; None: NCCL's default."
    )
    data_dir: SafePath | None = Field(
        None,
        description="tf_cnn_benchmarks only: a TFRecord directory in the container (train-*-of-*); None: "
        "data's tfrecords/ (what data synth --tfrecords writes) when data is set, else synthetic data.",
    )
    data: Literal["synthetic"] | ListPath = Field(
        "synthetic",
        description="The input: synthetic tensors, or an ImageNet-layout directory in the container "
        "(train/<class>/*.JPEG, val/<class>/*.JPEG; under a container.mounts target) read by resnet50's real "
        "pipeline; tf_cnn_benchmarks reads its tfrecords/ shards.",
    )
    loader_workers: int | None = Field(
        None,
        ge=0,
        le=256,
        description="DataLoader worker processes per rank; None: the container's cores per rank.",
    )
    epochs: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Real data: train this many epochs (evaluating after each) instead of steps.",
    )
    target_top1: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Real data: the top-1 accuracy on val whose first epoch and time are reported.",
    )
    base_lr: float = Field(
        0.1,
        gt=0,
        le=100,
        description="Learning rate for a global batch of 256, scaled linearly (Goyal et al.).",
    )
    warmup_epochs: float = Field(
        1.0,
        ge=0,
        le=1000,
        description="Real data: epochs of linear learning-rate warm-up from base_lr/world size.",
    )
    skip_bad_images: bool = Field(
        False, description="Real data: leave out (and count) files that do not decode, instead of stopping."
    )
    loader_only: bool = Field(False, description="Real data: run the input pipeline alone (no model).")
    drop_caches: bool = Field(
        False,
        description="Drop every node's page cache before each repeat (root on hosts only; refused on "
        "containers, such as the sandbox's nodes).",
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
    model_size: GptSize = Field(
        "124m",
        description="gpt only: the transformer's size: tiny (2 layers of width 128, for CPUs), 124m, 350m, "
        "1.3b, or explicit L<layers>-H<heads>-W<width> (e.g. L24-H16-W2048; the heads divide the width).",
    )
    seq_len: int = Field(1024, ge=8, le=32768, description="gpt only: tokens per sequence.")
    activation_checkpointing: bool = Field(
        False,
        description="gpt only: recompute each block's activations in the backward pass (torch.utils.checkpoint) "
        "instead of keeping them: less memory, about a third more compute; MFU still counts model FLOPs.",
    )
    collective: Literal["allreduce", "allgather", "reducescatter"] = Field(
        "allreduce",
        description="allreduce and nccl-tests only: the collective measured (FSDP's are allgather and "
        "reducescatter; `run gpt --framework fsdp --preflight` measures both).",
    )

    @model_validator(mode="after")
    def _real_data_options_need_data(self) -> RunDefaults:
        """Epochs, a target, the loader alone and skipping bad images all read a real dataset."""
        if self.data == "synthetic":
            asked = [
                name
                for name, value in (
                    ("epochs", self.epochs), ("target_top1", self.target_top1),
                    ("loader_only", self.loader_only or None), ("skip_bad_images", self.skip_bad_images or None),
                )
                if value is not None
            ]  # fmt: skip
            if asked:
                raise ValueError(
                    f"{', '.join(asked)} need(s) a real dataset, and data is synthetic; set data (--data) to an "
                    "ImageNet-layout directory in the container"
                )
        if self.target_top1 is not None and self.epochs is None:
            raise ValueError("target_top1 is judged after each epoch; set epochs (--epochs) too")
        return self


# The registered workloads (clusterctl.workloads' registry; a unit test keeps the two lists equal: the
# inventory sits below the workloads and cannot import their registry).
WorkloadName = Literal["resnet50", "tf_cnn_benchmarks", "nccl-tests", "allreduce", "gpt"]


class _Unset(Strict):
    """Base of a partial model: a field left out is None and means "not set here" (never validated)."""

    model_config = ConfigDict(validate_default=False)


def _partial(model: type[Strict], name: str, doc: str) -> type[Strict]:
    """``model`` with every field optional: same types, bounds and descriptions, default None (unset).

    One list of run settings (``RunDefaults``), not two: a workload's section checks each value as the
    ``run`` section does, and a value given as null where the field takes none is refused the same way.
    """
    fields: dict[str, Any] = {}
    for field, info in model.model_fields.items():
        annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        fields[field] = (annotation, Field(None, description=info.description))
    return create_model(name, __base__=_Unset, __doc__=doc, __module__=__name__, **fields)


if TYPE_CHECKING:
    WorkloadRun = Strict
else:
    WorkloadRun = _partial(
        RunDefaults,
        "WorkloadRun",
        "One workload's run settings (any field of run); they win over run's for that workload only.",
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


class SlurmLogin(Strict):
    """The login node clusterctl submits from, reached over SSH like any node (host key verified)."""

    address: HostAddress = Field(description="Address of the login node.")
    ssh: SshSettings = Field(default_factory=SshSettings)


class SlurmSpec(Strict):
    """Run through an existing Slurm: `sbatch` on the login node, ranks started by `srun --mpi=...`."""

    default: bool = Field(True, description="`run` uses the slurm launcher unless given --launcher ssh.")
    login: SlurmLogin
    run_dir: ListPath = Field(
        description="Absolute directory on storage the login node and the batch host share: each run's "
        "batch script and output go in a subdirectory (no ',' or ':': the job's payload is mounted from "
        "there, and pyxis' --container-mounts and apptainer's --bind split a path at both)."
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
    run: RunDefaults = Field(
        default_factory=RunDefaults,
        description="Run settings for every workload. A setting left out takes the workload's own default for "
        "the nodes' devices (e.g. gpt on CPUs: the tiny model; resnet50 on CPUs: batch 8 of 64 px images), "
        "else the field's default below.",
    )
    workloads: dict[WorkloadName, WorkloadRun] = Field(
        default_factory=dict,
        description="Per workload, run settings that win over run's for it alone, e.g. workloads: {resnet50: "
        "{batch_size: 256}, gpt: {batch_size: 16, precision: bf16}}: a batch or a framework one workload "
        "takes and another cannot. The command line's options win over both.",
    )
    provision: ProvisionSpec = Field(default_factory=ProvisionSpec)
    preflight: PreflightSpec = Field(default_factory=PreflightSpec)
    slurm: SlurmSpec | None = Field(
        None, description="Run through Slurm (the slurm launcher); None: ssh only."
    )
    delivery: DeliverySpec = Field(default_factory=DeliverySpec)
    state: StateSpec = Field(default_factory=StateSpec)
    baselines: Annotated[Path, TextOnly, Field(strict=False)] | None = Field(
        None,
        description="This site's own baselines (a file `clusterctl baseline save` writes, in the shipped "
        "baselines.yml's format): an entry matching the hardware wins over the shipped figures for `check "
        "pairs` and `run --preflight`'s default minimum. Relative: to the inventory file's directory; it "
        "need not exist yet.",
    )

    _source: Path | None = PrivateAttr(None)

    @field_validator("baselines")
    @classmethod
    def _baselines_beside_the_inventory(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        """Resolve the path against the inventory's directory (``context["inventory_dir"]``)."""
        if value is None:
            return None
        return Path((info.context or {}).get("inventory_dir") or ".") / value.expanduser()

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

    def run_settings(self, workload: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
        """The settings a run of ``workload`` starts from, before the command line's: ``defaults`` (the
        workload's own for these devices), then what ``run`` sets, then ``workloads.<workload>``."""
        section = self.workloads.get(workload)  # type: ignore[call-overload]
        own = section.model_dump(exclude_unset=True) if section is not None else {}
        return {**defaults, **self.run.model_dump(exclude_unset=True), **own}

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
