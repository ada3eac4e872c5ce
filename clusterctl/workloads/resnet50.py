"""The payload's ResNet-50 synthetic benchmark (PyTorch, Horovod or DDP) and its result line."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from clusterctl.diagnostics.model import marker_values
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.workloads.base import Metric, Reading, Volume, Workload, expect, missing_result
from clusterctl.workloads.breakdown import RankBreakdown, parse_breakdown
from clusterctl.workloads.compute import ComputeFacts, parse_peak_lines
from clusterctl.workloads.flops import resnet50_forward_macs, training_flops

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, Inventory, RunDefaults
    from clusterctl.workloads.job import Job

RESULT_PREFIX = "CLUSTERCTL_RESULT "
SCRIPT = f"{CONTAINER_PAYLOAD_DIR}/resnet50_bench.py"
RATES = ("total_images_per_sec", "images_per_sec_per_device")
# What a real-data run's result line adds (issue 23): the loader's own rate, top-1, time to target.
REAL_DATA_FIGURES = {
    "loader_images_per_sec": "img/s",
    "loader_images_per_sec_per_worker": "img/s",
    "input_share": "fraction",
    "top1": "fraction",
    "time_to_target_s": "s",
    "skipped_images": "files",
}
# Trainable parameters of the payload's ResNet-50 at 1000 classes (torchvision's count; a test
# counts the payload's model).
PARAMETERS = 25_557_032


def parse_result_line(log: str) -> dict[str, Any] | None:
    """Rank 0's last ``CLUSTERCTL_RESULT {json}`` line from ``log`` (tagged or not, wherever mpirun or
    srun put it in a line: ``marker_values``), or None."""
    found: dict[str, Any] | None = None
    for rank, value in marker_values(log, RESULT_PREFIX):
        if rank in (None, 0) and isinstance(value, dict):
            found = value
    return found


def number(value: object) -> float | None:
    """A JSON number as a float (NaN and Infinity included: judging refuses them), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond float's range
        return math.inf


def result_or_finding(workload: str, metric: str, result: dict[str, Any] | None) -> dict[str, Any] | Finding:
    """Rank 0's result line (``parse_result_line``), or the error finding when it is missing or ``metric``
    in it is not a number."""
    if result is None:
        return missing_result(workload, "CLUSTERCTL_RESULT line from rank 0")
    if number(result.get(metric)) is None:
        return missing_result(workload, f"number as {metric} in rank 0's CLUSTERCTL_RESULT line")
    return result


def payload_compute(
    precision: str, result: dict[str, Any] | None, log: str, flops_per_sample: float, derivation: str
) -> ComputeFacts:
    """A PyTorch payload's ``ComputeFacts``: fp32 counts as tf32 where rank 0's result line (``result``)
    says the payload enabled TF32; the device's name as the payload printed it; the CPU peak its ranks
    measured (their lines in ``log``)."""
    result = result or {}
    name = result.get("device_name")
    return ComputeFacts(
        flops_per_sample=flops_per_sample,
        derivation=derivation,
        precision="tf32" if precision == "fp32" and result.get("tf32") is True else precision,
        device_name=name if isinstance(name, str) else None,
        measured_peak=parse_peak_lines(log),
    )


# Steps traced with run --trace, after the warm-up and outside the measurement (payload/tracing.py).
TRACE_STEPS = 3
# The defaults on CPUs (the sandbox's): batch 8 of 64 px images, about 0.4 s a step on one core; at the
# GPU defaults (64 of 224 px) a step on a core takes minutes.
CPU_DEFAULTS: dict[str, object] = {"batch_size": 8, "image_size": 64}


LOADER_PREFIX = "CLUSTERCTL_LOADER "


def loader_rates_by_node(log: str) -> dict[str, float]:
    """``loader_images_per_sec[<host>]``: the input pipeline's rate on each node, the sum of its ranks'
    ``CLUSTERCTL_LOADER`` lines (every rank prints one, with its host)."""
    rates: dict[str, float] = {}
    for _, value in marker_values(log, LOADER_PREFIX):
        rate = number(value.get("images_per_sec")) if isinstance(value, dict) else None
        host = value.get("host") if isinstance(value, dict) else None
        if rate is not None and isinstance(host, str):
            rates[host] = rates.get(host, 0.0) + rate
    return {f"loader_images_per_sec[{host}]": rate for host, rate in sorted(rates.items())}


def epoch_metrics(result: dict[str, Any]) -> dict[str, Metric]:
    """Each epoch's val top-1, training time and rate from an epochs run's result line: ``top1[epoch N]``,
    ``train_seconds[epoch N]``, ``images_per_sec[epoch N]`` (its steps x batch x world size over its
    training time), and the cold/warm view: ``cold_images_per_sec`` (the first epoch) and
    ``warm_images_per_sec`` (the median of the later ones; only with two epochs or more)."""
    epochs = result.get("epochs")
    metrics: dict[str, Metric] = {}
    images_per_step = _images_per_step(result)
    rates: list[float] = []
    for entry in epochs if isinstance(epochs, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("epoch"), int):
            continue
        for name, unit in (("top1", "fraction"), ("train_seconds", "s")):
            value = number(entry.get(name))
            if value is not None:
                metrics[f"{name}[epoch {entry['epoch']}]"] = Metric(value=value, unit=unit)
        steps, seconds = number(entry.get("steps")), number(entry.get("train_seconds"))
        if images_per_step and steps and seconds and seconds > 0:
            rates.append(steps * images_per_step / seconds)
            metrics[f"images_per_sec[epoch {entry['epoch']}]"] = Metric(value=rates[-1], unit="img/s")
    if rates:
        metrics["cold_images_per_sec"] = Metric(value=rates[0], unit="img/s")
    if len(rates) > 1:
        metrics["warm_images_per_sec"] = Metric(value=statistics.median(rates[1:]), unit="img/s")
    return metrics


def _images_per_step(result: dict[str, Any]) -> float | None:
    """Images one training step takes, all ranks together: the result line's batch x world size."""
    batch, world = number(result.get("batch_size")), number(result.get("world_size"))
    return batch * world if batch and world else None


class ResNet50(Workload):
    """ResNet-50 v1.5 on synthetic images, data parallel through Horovod or PyTorch DDP."""

    name = "resnet50"
    model = "resnet50"
    primary_metric = "total_images_per_sec"
    description = "clusterctl's PyTorch ResNet-50 synthetic benchmark (the image's payload)"

    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """``python resnet50_bench.py`` with the run's settings.

        Raises:
            InputError: --framework fsdp (sharding is the gpt workload's; ResNet-50's 25.6 M parameters fit).
        """
        del gpu
        if settings.framework == "fsdp":
            raise InputError(
                "--framework fsdp: resnet50 runs with horovod or ddp; FSDP is the gpt workload's "
                "(`clusterctl run gpt --framework fsdp`)."
            )
        argv = [
            "python",
            SCRIPT,
            f"--framework={settings.framework}",
            f"--batch-size={settings.batch_size}",
            f"--precision={settings.precision}",
            f"--warmup-steps={settings.warmup_steps}",
            f"--steps={settings.steps}",
            f"--image-size={settings.image_size}",
            f"--display-every={settings.display_every}",
        ]
        if settings.data_format == "NHWC":
            argv.append("--channels-last")
        if settings.trace:
            argv.append(f"--trace-steps={TRACE_STEPS}")
        if settings.xla:
            argv.append("--compile")
        argv += _data_argv(settings)
        if settings.framework == "ddp":  # the rendezvous address comes from MASTER_ADDR (workloads/job.py)
            argv.append(f"--bucket-cap-mb={settings.bucket_cap_mb:g}")
        elif settings.fp16_allreduce:
            argv.append("--fp16-allreduce")
        return argv

    def defaults(self, inventory: Inventory) -> dict[str, object]:
        """On CPUs, batch 8 of 64 px images (a step in about a second on a core); on GPUs, ``RunDefaults``'
        batch 64 at 224 px."""
        return {} if inventory.primary.gpus.count else dict(CPU_DEFAULTS)

    def gradient_bytes(self, settings: RunDefaults) -> int:
        """Every parameter's gradient, all-reduced each step (warm-up steps too).

        The gradients are float32 whatever the precision (autocast keeps the weights in float32);
        Horovod's ``--fp16-allreduce`` halves them on the wire. DDP ignores that option.
        """
        half = settings.framework == "horovod" and settings.fp16_allreduce
        return PARAMETERS * (2 if half else 4)

    def allreduce_volume(self, settings: RunDefaults) -> Volume | None:
        """The gradients of every step (``Workload``); None for ``loader_only`` (nothing is all-reduced) and
        for ``epochs`` (the step count follows the dataset's size, unknown before the run)."""
        if settings.loader_only or settings.epochs is not None:
            return None
        return super().allreduce_volume(settings)

    def read(self, log: str, job: Job) -> Reading:
        """Rank 0's result line parsed once for the metrics, the sanity and the compute facts."""
        result = parse_result_line(log)
        settings = job.options.settings
        return Reading(
            self._metrics(result, log),
            self._sanity(result, job),
            parse_breakdown(log),
            self._compute(settings, result, log),
            {},
        )

    def compute(self, settings: RunDefaults, log: str) -> ComputeFacts | None:
        """The payload's own ResNet-50 v1.5 at the run's image size, counted layer by layer (``flops``);
        the math precision: fp32 runs as tf32 where rank 0's result line says the payload enabled TF32.
        None for ``loader_only``: no model runs, its rate is the input pipeline's."""
        return self._compute(settings, parse_result_line(log), log)

    def _compute(self, settings: RunDefaults, result: dict[str, Any] | None, log: str) -> ComputeFacts | None:
        if settings.loader_only:
            return None
        macs = resnet50_forward_macs(settings.image_size)
        return payload_compute(
            settings.precision,
            result,
            log,
            training_flops(macs),
            f"ResNet-50 v1.5 at {settings.image_size}x{settings.image_size}: {macs:,} MACs forward "
            "x 2 FLOPs x 3 (forward + backward)",
        )

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """PyTorch, which the payload is written in (the paper image has TensorFlow 1.14 on Python 2.7)."""
        return None if versions.framework == "pytorch" else "PyTorch"

    def metrics(self, log: str) -> dict[str, Metric]:
        """Total and per-device img/s from rank 0's result line (and, for real data, the loader's rate, top-1,
        time to target; the loader's rate per node from every rank's line); a figure that is not a number
        is left out (sanity then finds no result, or judging finds a non-finite one)."""
        return self._metrics(parse_result_line(log), log)

    def _metrics(self, found: dict[str, Any] | None, log: str) -> dict[str, Metric]:
        result = found or {}
        units = {**dict.fromkeys(RATES, "img/s"), **REAL_DATA_FIGURES}
        figures = {name: number(result.get(name)) for name in units}
        metrics = {
            name: Metric(value=value, unit=units[name])
            for name, value in figures.items()
            if value is not None
        }
        metrics |= {
            name: Metric(value=rate, unit="img/s") for name, rate in loader_rates_by_node(log).items()
        }
        return metrics | epoch_metrics(result)

    def breakdown(self, log: str) -> list[RankBreakdown]:
        """Every rank's ``CLUSTERCTL_BREAKDOWN`` line (the payload's per-step phases), by rank."""
        return parse_breakdown(log)

    def sanity(self, log: str, plan: Job) -> list[Finding]:
        """The result line is there and echoes the model, batch, world size and precision asked for."""
        return self._sanity(parse_result_line(log), plan)

    def _sanity(self, found: dict[str, Any] | None, plan: Job) -> list[Finding]:
        result = result_or_finding(self.name, self.primary_metric, found)
        if isinstance(result, Finding):
            return [result]
        s = plan.options.settings
        return [
            *_compile_note(s.xla, s.framework, result.get("compile")),
            *_decoder_note(result),
            *_input_bound(result),
            *expect("wrong-model", result.get("model"), self.model, "model"),
            *expect("wrong-batch-size", result.get("batch_size"), s.batch_size, "batch size per device"),
            *expect("wrong-world-size", result.get("world_size"), plan.world_size, "world size"),
            *expect("wrong-precision", result.get("precision"), s.precision, "precision"),
            *expect("wrong-framework", result.get("framework"), s.framework, "framework"),
        ]


def _input_bound(result: dict[str, Any]) -> list[Finding]:
    """The payload's verdict on a real-data run: training waited on its input pipeline."""
    if result.get("input_bound") is not True:
        return []
    loader, training = (
        number(result.get("loader_images_per_sec")),
        number(result.get("total_images_per_sec")),
    )
    share = number(result.get("input_share"))
    return [
        Finding(
            severity="warning",
            code="input-bound",
            message=f"input-bound: the input pipeline alone reads {loader or 0:,.1f} img/s against training's "
            f"{training or 0:,.1f} img/s, and {100 * (share or 0):.0f}% of each step waited for input.",
            advice="More loader workers (run.loader_workers), more CPU cores per rank, faster storage, or "
            "smaller JPEGs; `run --loader-only` measures the pipeline alone on every node.",
        )
    ]


def _data_argv(settings: RunDefaults) -> list[str]:
    """The payload's real-data options; none for synthetic data."""
    if settings.data == "synthetic":
        return []
    argv = [
        f"--data={settings.data}",
        f"--base-lr={settings.base_lr:g}",
        f"--warmup-epochs={settings.warmup_epochs:g}",
    ]
    if settings.loader_workers is not None:
        argv.append(f"--loader-workers={settings.loader_workers}")
    if settings.epochs is not None:
        argv.append(f"--epochs={settings.epochs}")
    if settings.target_top1 is not None:
        argv.append(f"--target-top1={settings.target_top1:g}")
    argv += [
        flag
        for flag, on in (
            ("--skip-bad-images", settings.skip_bad_images),
            ("--loader-only", settings.loader_only),
        )
        if on
    ]
    return argv


_DECODERS = {
    "dali": "NVIDIA DALI on the GPU (file reader, nvJPEG decoder, random resized crop)",
    "pillow": "Pillow in DataLoader worker processes",
}


def _decoder_note(result: dict[str, Any]) -> list[Finding]:
    """A real-data run's record says which pipeline decoded its images (the payload's ``decoder``)."""
    decoder = result.get("decoder")
    if decoder not in _DECODERS:
        return []
    return [
        Finding(
            severity="info",
            code="input-decoder",
            message=f"The images were decoded by {_DECODERS[str(decoder)]}.",
            advice="DALI is used on GPUs where the image has it (the modern profile), except with "
            "--skip-bad-images; Pillow otherwise.",
        )
    ]


def _compile_note(asked: bool, framework: str, compiled: object) -> list[Finding]:
    """Say so when torch.compile was asked for and the payload did not compile (Horovod)."""
    if not asked or compiled is not False:
        return []
    return [
        Finding(
            severity="info",
            code="compile-not-used",
            message=f"run.xla asked for torch.compile, but the payload does not compile under {framework}: "
            "a compiled backward serialises Horovod's allreduces after the whole backward pass.",
            advice="Use --framework ddp to measure a compiled model (PyTorch's DDPOptimizer overlaps it).",
        )
    ]
