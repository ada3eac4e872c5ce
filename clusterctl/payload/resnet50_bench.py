"""ResNet-50 synthetic-data training benchmark, data parallel through Horovod or PyTorch DDP.

Shipped inside the benchmark image and launched by mpirun on every rank; it imports only torch,
the standard library and (for --framework horovod) horovod, never clusterctl. The model is
written here because no CPU build of torchvision exists: it is torchvision's ResNet-50 v1.5
(Bottleneck blocks [3, 4, 6, 3], stride on the 3x3 convolution), 25,557,032 parameters at 1000
classes.

Under DDP, ranks come from whichever launcher started them (``ranks.resolve_ranks``: Open MPI, Slurm,
PMIx or torchrun, which must agree) and the rendezvous from ``MASTER_ADDR``/``MASTER_PORT`` (the
launchers set them: the ssh launcher rank 0's fabric address, the batch script the allocation's first
node). Rank 0 prints
one line of throughput every --display-every steps and, at the end, one machine-readable line:

    CLUSTERCTL_RESULT {"total_images_per_sec": ..., "world_size": ..., ...}

Every rank also prints its own per-step breakdown (``steptimer.py``), one ``CLUSTERCTL_BREAKDOWN`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload.dataopts import add_data_options
    from clusterctl.payload.emit import emit_line
    from clusterctl.payload.peak import peak_line
    from clusterctl.payload.ranks import gpu_choice, placement_line, resolve_ranks
    from clusterctl.payload.steptimer import StepTimer, breakdown_line
    from clusterctl.payload.tracing import run_traced
else:
    from dataopts import add_data_options
    from emit import emit_line
    from peak import peak_line
    from ranks import gpu_choice, placement_line, resolve_ranks
    from steptimer import StepTimer, breakdown_line
    from tracing import run_traced

RESULT_PREFIX = "CLUSTERCTL_RESULT "
MODEL_NAME = "resnet50"
# How long exit_cleanly waits for each of the payload's own threads (they end with their work).
THREAD_JOIN_S = 30.0

# --------------------------------------------------------------------------- the model


def _conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand x4."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv1x1(in_planes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual block forward pass."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 v1.5 with the same layers, names and parameter count as torchvision's resnet50."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.in_planes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, 3)
        self.layer2 = self._make_layer(128, 4, stride=2)
        self.layer3 = self._make_layer(256, 6, stride=2)
        self.layer4 = self._make_layer(512, 3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        out_planes = planes * Bottleneck.expansion
        downsample = None
        if stride != 1 or self.in_planes != out_planes:
            downsample = nn.Sequential(
                _conv1x1(self.in_planes, out_planes, stride), nn.BatchNorm2d(out_planes)
            )
        layers = [Bottleneck(self.in_planes, planes, stride, downsample)]
        self.in_planes = out_planes
        layers += [Bottleneck(self.in_planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of NCHW images."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def parameter_count(model: nn.Module) -> int:
    """Number of trainable parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------- ranks and frameworks


def import_horovod() -> Any:
    """``horovod.torch``; SystemExit naming the image (``CLUSTERCTL_IMAGE``, set by the launcher) without it.

    NGC's PyTorch images no longer ship Horovod: under Slurm they run the payload with DDP.
    """
    try:
        import horovod.torch as hvd
    except ImportError as exc:
        image = os.environ.get("CLUSTERCTL_IMAGE") or "this image"
        raise SystemExit(
            f"resnet50_bench: --framework horovod needs Horovod, which {image} lacks ({exc}); run "
            "--framework ddp, or an image with Horovod (the one `clusterctl image build` makes)."
        ) from None
    return hvd


class Trainer:
    """What differs between Horovod and DDP: initialisation, wrapping, and the optimizer step."""

    def __init__(self, args: argparse.Namespace):
        self.framework: str = args.framework
        self.horovod_version: str | None = None
        if self.framework == "horovod":
            hvd = import_horovod()
            import horovod

            hvd.init()
            self.hvd = hvd
            self.rank, self.world_size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
            self.horovod_version = horovod.__version__
        else:
            import torch.distributed as dist

            ranks = resolve_ranks(os.environ)
            self.rank, self.world_size, self.local_rank = ranks.rank, ranks.world_size, ranks.local_rank
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(
                backend,
                init_method=f"tcp://{args.master_addr}:{args.master_port}",
                rank=self.rank,
                world_size=self.world_size,
            )
            self.dist = dist
        # One GPU per rank, on its CPUs' socket (ranks.gpu_choice); a CPU rank of a GPU-shaped Slurm
        # computes on CPUs and says which GPU it would have used. Refused before training if shared.
        cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        choice = gpu_choice(os.environ, self.local_rank, cuda)
        self.device = torch.device("cuda", choice.index) if choice and cuda else torch.device("cpu")
        if choice:
            uuid = str(torch.cuda.get_device_properties(self.device).uuid) if cuda else None
            cpus = sorted(os.sched_getaffinity(0))
            emit_line(placement_line(os.environ, self.rank, self.local_rank, choice, cpus, uuid))
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)

    def wrap(
        self, model: nn.Module, args: argparse.Namespace, *, compiled: bool = False
    ) -> tuple[nn.Module, torch.optim.Optimizer]:
        """The model and optimizer made data parallel, with identical initial weights on every rank.

        DDP: gradients live in the communication buckets (``gradient_as_bucket_view``, no copy),
        the graph is declared static (the bucket order is learnt once), and buffers are not
        re-broadcast every step (batch-norm statistics stay per rank, as Horovod's do). Horovod:
        optional fp16 compression of the allreduce (``--fp16-allreduce``).
        """
        lr = 0.01 * self.world_size
        impl = optimizer_impl(args.optimizer_impl, self.device)
        if self.framework == "horovod":
            optimizer = _sgd(model.parameters(), lr, impl)
            compression = self.hvd.Compression.fp16 if args.fp16_allreduce else self.hvd.Compression.none
            optimizer = self.hvd.DistributedOptimizer(
                optimizer, named_parameters=model.named_parameters(), compression=compression
            )
            self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            return model, optimizer
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        ddp = DistributedDataParallel(
            model,
            device_ids=ids,
            bucket_cap_mb=args.bucket_cap_mb,
            gradient_as_bucket_view=True,
            static_graph=not compiled,  # a compiled model's graph is split by DDPOptimizer instead
            **_no_forward_buffer_sync(DistributedDataParallel),
        )
        return ddp, _sgd(ddp.parameters(), lr, impl)

    def barrier(self) -> None:
        """Wait until every rank gets here (the clock starts together everywhere)."""
        if self.framework == "horovod":
            self.hvd.allreduce(torch.zeros(1), name="clusterctl.barrier")
        else:
            self.dist.barrier()

    def slowest(self, seconds: float) -> float:
        """The largest of every rank's ``seconds``: the run is as fast as its slowest rank."""
        value = torch.tensor([seconds], dtype=torch.float64)
        if self.framework == "horovod":
            return float(self.hvd.allreduce(value, name="clusterctl.elapsed", op=self.hvd.Max).item())
        if self.device.type == "cuda":
            value = value.to(self.device)
        self.dist.all_reduce(value, op=self.dist.ReduceOp.MAX)
        return float(value.item())

    def sum_all(self, values: list[float]) -> list[float]:
        """Every rank's ``values`` summed element-wise (validation's correct and total counts)."""
        tensor = torch.tensor(values, dtype=torch.float64)
        if self.framework == "horovod":
            return [float(v) for v in self.hvd.allreduce(tensor, name="clusterctl.sum", op=self.hvd.Sum)]
        if self.device.type == "cuda":
            tensor = tensor.to(self.device)
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.SUM)
        return [float(v) for v in tensor.cpu()]

    def synchronize(self, optimizer: torch.optim.Optimizer) -> None:
        """Wait for the gradients' allreduce: Horovod's ``synchronize``; DDP waited inside ``backward()``."""
        if self.framework == "horovod":
            optimizer.synchronize()  # type: ignore[attr-defined]

    def step(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
        """Apply the gradients ``synchronize`` waited for."""
        with optimizer.skip_synchronize() if self.framework == "horovod" else contextlib.nullcontext():  # type: ignore[attr-defined]
            if scaler is None:
                optimizer.step()
                return
            scaler.step(optimizer)
            scaler.update()

    def shutdown(self) -> None:
        """Leave the communicator cleanly, the first step of ``exit_cleanly``'s order: every rank's
        collectives finished (Gloo's barrier waits for all earlier work on the group, FSDP's
        asynchronous all-gathers and reduce-scatters included), then the group destroyed; Horovod's
        ``shutdown`` is collective and joins its background thread."""
        if self.framework == "horovod":
            self.hvd.shutdown()
        else:
            self.dist.barrier()
            self.dist.destroy_process_group()


def exit_cleanly(code: int) -> NoReturn:
    """End a rank whose ``main`` returned ``code`` after ``Trainer.shutdown``: the payload's own threads
    joined, stdout and stderr flushed, then the process ended at once, without the interpreter's
    teardown.

    Why not a plain return: ``destroy_process_group`` does not end the Gloo group's threads (its two
    ``pt_gloo_runloop`` workers, the ``gloo_tcp_loop`` and, on rank 0, the store's ``pt_tcpstore_uv``
    are still running after it and after a full garbage collection: DDP's reducer, FSDP's mesh
    info and torch's own caches still hold the group). The interpreter's teardown then frees torch's
    objects while those threads live; a worker that releases a tensor needs the GIL of a finalizing
    interpreter, which ends the thread with ``pthread_exit`` inside a ``noexcept`` destructor:
    ``terminate called without an active exception``, SIGABRT, at random (PyTorch PR 179291
    describes the same teardown). Nothing is left to tear down once the group is destroyed and the
    output flushed, so the rank leaves with ``os._exit``.
    """
    for thread in threading.enumerate():  # a data loader's or DALI's helpers (daemons are left)
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(THREAD_JOIN_S)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


# --------------------------------------------------------------------------- the benchmark


def _no_forward_buffer_sync(ddp_class: type[object]) -> dict[str, Any]:
    """DDP's keyword for "do not re-broadcast buffers before every forward", in this torch's spelling.

    torch 2.13 renamed ``broadcast_buffers`` to ``forward_sync_buffers`` (the new one still syncs
    once at construction, which keeps the initial weights identical on every rank).
    """
    if "forward_sync_buffers" in inspect.signature(ddp_class.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}


# How the optimizer's update runs over the parameters (``--optimizer-impl``): one loop iteration per
# parameter, torch's multi-tensor ``foreach`` kernels, or one ``fused`` kernel for all of them.
OPTIMIZER_IMPLS = ("auto", "for-loop", "foreach", "fused")


def optimizer_impl(asked: str, device: torch.device) -> str:
    """The update the run uses: ``auto`` is the fused kernel on a GPU (one launch for every parameter
    instead of one each) and torch's own default on a CPU, the for-loop."""
    if asked != "auto":
        return asked
    return "fused" if device.type == "cuda" else "for-loop"


def _sgd(params, lr: float, impl: str) -> torch.optim.Optimizer:
    """Plain SGD, its update run as ``impl`` (``optimizer_impl``'s answer)."""
    return torch.optim.SGD(params, lr=lr, foreach=impl == "foreach", fused=impl == "fused")


# TF32 tensor cores arrived with Ampere (compute capability 8.0).
TF32_SINCE = (8, 0)


def use_tf32(precision: str, capability: tuple[int, int] | None) -> bool:
    """Whether fp32 convolutions and matmuls should run as TF32: on a GPU that has TF32 tensor cores.

    PyTorch leaves TF32 off for matmuls by default; fp32 ResNet-50 on Ampere or newer then runs on the
    CUDA cores at a fraction of the tensor cores' rate. Mixed precision does not need it (autocast
    computes in bf16/fp16), a CPU has no TF32 (``capability`` None), nor do GPUs before Ampere.
    """
    return precision == "fp32" and capability is not None and capability >= TF32_SINCE


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``; None for fp32.

    Raises:
        SystemExit: fp16 asked for on a CPU (PyTorch's CPU autocast has no float16), or bf16 on a
            GPU without bfloat16 support (a V100: use fp16, which runs with a GradScaler).
    """
    if precision == "fp32":
        return None
    if precision == "fp16" and device.type == "cpu":
        raise SystemExit(
            "resnet50_bench: --precision fp16 is not supported on CPU (PyTorch CPU autocast has no "
            "float16); use --precision bf16 or fp32."
        )
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        name = torch.cuda.get_device_name(device)
        raise SystemExit(
            f"resnet50_bench: --precision bf16 is not supported on {name} (no bfloat16 tensor cores "
            "before Ampere); use --precision fp16 (mixed precision with a gradient scaler) or fp32."
        )
    return torch.float16 if precision == "fp16" else torch.bfloat16


# torch.compile's modes (``--compile-mode``): "reduce-overhead" captures the compiled step in CUDA graphs
# (the static-shape step replayed with one launch), the max-autotune ones benchmark kernel choices first.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_wanted(args: argparse.Namespace) -> tuple[bool, str | None]:
    """Whether to ``torch.compile`` the model, and a note when ``--compile`` is not honoured.

    Horovod's hooks sit on the gradient accumulators: under a compiled backward every allreduce
    waits for the whole backward pass, so nothing overlaps. PyTorch supports compile with DDP
    only (its DDPOptimizer splits the graph at bucket boundaries).
    """
    if args.compile and args.framework == "horovod":
        return False, (
            "note: --compile is ignored with --framework horovod (a compiled backward serialises "
            "Horovod's allreduces after it); use --framework ddp to compile."
        )
    return args.compile, None


def _untimed(*_: str) -> None:
    """A step's phase edge when the step is not measured (warm-up)."""


def timed_windows(
    train_step: Callable[[], object], steps: int, window: int, sync: Callable[[], None]
) -> Iterator[tuple[int, float]]:
    """Run ``steps`` training steps; yield (step number, seconds since the start) at window edges.

    The device is synchronised only at the start and at the end of each window of ``window``
    steps (and at the last step), so the host keeps queueing work between them.
    """
    sync()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        train_step()
        if step % window == 0 or step == steps:
            sync()
            yield step, time.perf_counter() - start


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["horovod", "ddp"], default="horovod")
    p.add_argument("--batch-size", type=int, default=64, help="images per device per step")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (DDP only)")
    p.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default="default",
        help="torch.compile's mode with --compile: reduce-overhead replays the step's kernels as CUDA graphs",
    )
    p.add_argument(
        "--optimizer-impl",
        choices=OPTIMIZER_IMPLS,
        default="auto",
        help="the SGD update: auto (fused on a GPU, torch's for-loop on a CPU), for-loop, foreach or fused",
    )
    p.add_argument(
        "--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size (MB); torch's default"
    )
    p.add_argument(
        "--fp16-allreduce", action="store_true", help="Horovod: compress gradients to fp16 for the allreduce"
    )
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=100, help="measured steps")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--display-every", type=int, default=10)
    p.add_argument("--trace-steps", type=int, default=0, help="steps traced after the warm-up (tracing.py)")
    add_data_options(p)
    add_rendezvous_options(p)
    return p.parse_args(argv)


def add_rendezvous_options(parser: argparse.ArgumentParser) -> None:
    """DDP's rendezvous options, defaulting to torch's MASTER_ADDR / MASTER_PORT variables."""
    parser.add_argument(
        "--master-addr",
        default=os.environ.get("MASTER_ADDR", "127.0.0.1"),
        help="rank 0's address (DDP rendezvous); default $MASTER_ADDR, else 127.0.0.1",
    )
    parser.add_argument(
        "--master-port",
        type=int,
        default=int(os.environ.get("MASTER_PORT", "29500")),
        help="rank 0's port (DDP rendezvous); default $MASTER_PORT, else 29500",
    )


def use_allowed_cpus() -> int:
    """Run torch's intra-op pool on exactly the CPUs this process may use; return how many.

    ``torch.get_num_threads()`` defaults to every core of the machine, also inside a container
    limited to a cpuset: two ranks whose cpusets are disjoint would then each oversubscribe their
    share. The affinity mask is what the container (and mpirun's binding) really allows.
    """
    allowed = len(os.sched_getaffinity(0))
    torch.set_num_threads(allowed)
    return allowed


def device_facts(device: torch.device, cpu_threads: int) -> dict[str, Any]:
    """What the result line says of the device and the software the rank trained on."""
    return {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cuda_version": torch.version.cuda,
        "cpu_threads": cpu_threads,
        "torch_version": torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    """Train on synthetic data and report throughput from rank 0."""
    args = parse_args(argv)
    if args.trace_steps:  # Horovod reads it at init: its timeline is then started for the traced steps
        os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")
    cpu_threads = use_allowed_cpus()
    trainer = Trainer(args)
    device = trainer.device
    dtype = autocast_dtype(args.precision, device)
    real_facts: dict[str, Any] = {}
    if args.data is not None:  # the real pipeline's modules import Pillow: only for real data
        if TYPE_CHECKING:
            from clusterctl.payload.realtrain import RealData, loader_only, open_dataset
        else:
            from realtrain import RealData, loader_only, open_dataset

        train_samples, val_samples = open_dataset(args)
        if args.loader_only:
            return loader_only(args, trainer, train_samples, RESULT_PREFIX, MODEL_NAME)
    compile_model, compile_note = compile_wanted(args)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    tf32 = use_tf32(args.precision, capability)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # the input shape never changes: pick the fastest kernels
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    else:  # a CPU's peak for MFU, measured by every rank at once (peak.py)
        trainer.barrier()
        emit_line(peak_line(trainer.rank, args.precision))

    torch.manual_seed(0)
    model = ResNet50(args.num_classes).to(device, memory_format=memory_format)  # type: ignore[call-overload]  # Module.to takes memory_format; torch's overloads omit it
    model, optimizer = trainer.wrap(model, args, compiled=compile_model)
    if compile_model:
        model = torch.compile(model, mode=args.compile_mode)
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None

    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.num_classes, (args.batch_size,), device=device)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    real = RealData(args, trainer, optimizer, memory_format, train_samples) if args.data is not None else None

    def train_step(timer: StepTimer | None = None) -> bool:
        nonlocal images, labels
        begin, end = (timer.begin, timer.end) if timer else (_untimed, _untimed)
        begin()
        if real is not None:
            batch = real.next_batch()
            if batch is None:  # the epoch's last batch was taken
                return False
            images, labels = batch
        end("input")  # synthetic data: the batch is on the device already
        optimizer.zero_grad()  # torch 2.x sets grads to None (Horovod takes no argument)
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        end("forward")
        (scaler.scale(loss) if scaler else loss).backward()
        end("backward")
        trainer.synchronize(optimizer)
        end("exposed_comm")
        trainer.step(optimizer, scaler)
        end("optimizer")
        return True

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    leader = trainer.rank == 0
    global_batch = args.batch_size * trainer.world_size
    if leader:
        if compile_note:
            print(compile_note, flush=True)
        print(
            f"Model: {MODEL_NAME}  framework: {args.framework}  world size: {trainer.world_size}  "
            f"batch size per device: {args.batch_size}  precision: {args.precision}  device: {device.type}",
            flush=True,
        )
    timer = StepTimer(device)
    timer.watch(model)  # before the first backward: DDP takes a comm hook only then
    if real is not None:
        real_facts = real.loader_rate()
    if real is not None and args.epochs:
        real_facts |= real.epochs(model, val_samples, lambda: train_step(timer), sync, autocast)
        timer.read()
        args.steps, args.warmup_steps, elapsed = real.feeder.step, 0, real_facts["train_seconds"]
        return _finish(args, trainer, timer, elapsed, real_facts, cpu_threads, tf32, compile_model)
    for _ in timed_windows(train_step, args.warmup_steps, args.warmup_steps or 1, sync):
        pass
    if leader:
        print(f"Warm-up done ({args.warmup_steps} steps).", flush=True)
    if args.trace_steps:  # not measured: the profiler's cost stays out of the throughput
        hvd = trainer.hvd if trainer.framework == "horovod" else None
        for line in run_traced(train_step, args.trace_steps, sync, trainer.rank, hvd):
            emit_line(line)

    trainer.barrier()
    elapsed, last_step, last_time = 0.0, 0, 0.0
    for step, elapsed in timed_windows(lambda: train_step(timer), args.steps, args.display_every, sync):
        timer.read()  # the device was synchronised at this window edge
        if leader:
            rate = global_batch * (step - last_step) / (elapsed - last_time)
            print(f"Step {step}/{args.steps}: {rate:.2f} img/s total", flush=True)
            last_step, last_time = step, elapsed
    return _finish(args, trainer, timer, elapsed, real_facts, cpu_threads, tf32, compile_model)


def _finish(
    args: argparse.Namespace,
    trainer: Trainer,
    timer: StepTimer,
    elapsed: float,
    real_facts: dict[str, Any],
    cpu_threads: int,
    tf32: bool,
    compile_model: bool,
) -> int:
    """Rank 0's result line (the slowest rank's time), every rank's breakdown line; leave the communicator."""
    slowest = trainer.slowest(elapsed)
    device = trainer.device
    if real_facts:
        if TYPE_CHECKING:
            from clusterctl.payload.realtrain import input_facts
        else:
            from realtrain import input_facts

        real_facts |= input_facts(args, real_facts, timer.durations, slowest, trainer.world_size)
    if trainer.rank == 0:
        total = args.batch_size * trainer.world_size * args.steps / slowest
        result = {
            "model": MODEL_NAME,
            "framework": args.framework,
            "total_images_per_sec": round(total, 3),
            "images_per_sec_per_device": round(total / trainer.world_size, 3),
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "batch_size": args.batch_size,
            "image_size": args.image_size,
            "world_size": trainer.world_size,
            "precision": args.precision,
            "channels_last": args.channels_last,
            "tf32": tf32,
            "compile": compile_model,
            "compile_mode": args.compile_mode if compile_model else None,
            "optimizer_impl": optimizer_impl(args.optimizer_impl, device),
            "seconds": round(slowest, 6),
            **device_facts(device, cpu_threads),
            "horovod_version": trainer.horovod_version,
            "data": args.data or "synthetic",
            **real_facts,
        }
        emit_line(RESULT_PREFIX + json.dumps(result, sort_keys=True))
    summary = timer.summary(trainer.rank, elapsed, world_size=trainer.world_size, framework=args.framework)
    emit_line(breakdown_line(summary))
    trainer.shutdown()
    return 0


if __name__ == "__main__":
    exit_cleanly(main())
