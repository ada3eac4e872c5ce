"""The payload's ResNet-50 synthetic benchmark (PyTorch, Horovod or DDP) and its result line."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from clusterctl.diagnostics.model import split_tag
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.workloads.base import Metric, Workload, expect, missing_result
from clusterctl.workloads.breakdown import RankBreakdown, parse_breakdown
from clusterctl.workloads.compute import ComputeFacts, parse_peak_lines
from clusterctl.workloads.flops import resnet50_forward_macs, training_flops

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, RunDefaults
    from clusterctl.run.plan import LaunchPlan

RESULT_PREFIX = "CLUSTERCTL_RESULT "
SCRIPT = f"{CONTAINER_PAYLOAD_DIR}/resnet50_bench.py"
# Trainable parameters of the payload's ResNet-50 at 1000 classes (torchvision's count; a test
# counts the payload's model).
PARAMETERS = 25_557_032


def parse_result_line(log: str) -> dict[str, Any] | None:
    """Rank 0's ``CLUSTERCTL_RESULT {json}`` line from ``log`` (tagged or not), or None.

    mpirun --tag-output can glue a tag to the end of a line; the JSON object is read from the
    prefix onwards and anything after it is ignored.
    """
    found: dict[str, Any] | None = None
    decoder = json.JSONDecoder()
    for raw in log.splitlines():
        rank, line = split_tag(raw)
        start = line.find(RESULT_PREFIX)
        if start < 0 or rank not in (None, 0):
            continue
        try:
            value, _ = decoder.raw_decode(line, start + len(RESULT_PREFIX))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
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


def result_or_finding(workload: str, metric: str, log: str) -> dict[str, Any] | Finding:
    """Rank 0's result line in ``log``, or the error finding when it is missing or ``metric`` in it is not
    a number."""
    result = parse_result_line(log)
    if result is None:
        return missing_result(workload, "CLUSTERCTL_RESULT line from rank 0")
    if number(result.get(metric)) is None:
        return missing_result(workload, f"number as {metric} in rank 0's CLUSTERCTL_RESULT line")
    return result


def payload_compute(precision: str, log: str, flops_per_sample: float, derivation: str) -> ComputeFacts:
    """A PyTorch payload's ``ComputeFacts``: fp32 counts as tf32 where rank 0's result line says the payload
    enabled TF32; the device's name as the payload printed it; the CPU peak its ranks measured."""
    result = parse_result_line(log) or {}
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
        if settings.framework == "ddp":  # the rendezvous address comes from MASTER_ADDR (run/plan.py)
            argv.append(f"--bucket-cap-mb={settings.bucket_cap_mb:g}")
        elif settings.fp16_allreduce:
            argv.append("--fp16-allreduce")
        return argv

    def gradient_bytes(self, settings: RunDefaults) -> int:
        """Every parameter's gradient, all-reduced each step (warm-up steps too).

        The gradients are float32 whatever the precision (autocast keeps the weights in float32);
        Horovod's ``--fp16-allreduce`` halves them on the wire. DDP ignores that option.
        """
        half = settings.framework == "horovod" and settings.fp16_allreduce
        return PARAMETERS * (2 if half else 4)

    def compute(self, settings: RunDefaults, log: str) -> ComputeFacts:
        """The payload's own ResNet-50 v1.5 at the run's image size, counted layer by layer (``flops``);
        the math precision: fp32 runs as tf32 where rank 0's result line says the payload enabled TF32."""
        macs = resnet50_forward_macs(settings.image_size)
        return payload_compute(
            settings.precision,
            log,
            training_flops(macs),
            f"ResNet-50 v1.5 at {settings.image_size}x{settings.image_size}: {macs:,} MACs forward "
            "x 2 FLOPs x 3 (forward + backward)",
        )

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """PyTorch, which the payload is written in (the paper image has TensorFlow 1.14 on Python 2.7)."""
        return None if versions.framework == "pytorch" else "PyTorch"

    def metrics(self, log: str) -> dict[str, Metric]:
        """Total and per-device img/s from rank 0's result line; a figure that is not a number is left out
        (sanity then finds no result, or judging finds a non-finite one)."""
        result = parse_result_line(log) or {}
        figures = {
            name: number(result.get(name)) for name in ("total_images_per_sec", "images_per_sec_per_device")
        }
        return {
            name: Metric(value=value, unit="img/s") for name, value in figures.items() if value is not None
        }

    def breakdown(self, log: str) -> list[RankBreakdown]:
        """Every rank's ``CLUSTERCTL_BREAKDOWN`` line (the payload's per-step phases), by rank."""
        return parse_breakdown(log)

    def sanity(self, log: str, plan: LaunchPlan) -> list[Finding]:
        """The result line is there and echoes the model, batch, world size and precision asked for."""
        result = result_or_finding(self.name, self.primary_metric, log)
        if isinstance(result, Finding):
            return [result]
        s = plan.options.settings
        return [
            *_compile_note(s.xla, s.framework, result.get("compile")),
            *expect("wrong-model", result.get("model"), self.model, "model"),
            *expect("wrong-batch-size", result.get("batch_size"), s.batch_size, "batch size per device"),
            *expect("wrong-world-size", result.get("world_size"), plan.world_size, "world size"),
            *expect("wrong-precision", result.get("precision"), s.precision, "precision"),
            *expect("wrong-framework", result.get("framework"), s.framework, "framework"),
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
