"""The payload's GPT training benchmark (PyTorch DDP or FSDP2) and its result line.

Its arithmetic (parameters, FLOPs per token, bytes per step, memory) is ``gpt_arith``; this module is the
workload: the command, the refusals before launch, the metrics (tokens/s) and the sanity of the output,
the loss's included (finite and falling on the fixed batch).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.workloads.base import Metric, Reading, Volume, Workload, expect
from clusterctl.workloads.breakdown import RankBreakdown, parse_breakdown
from clusterctl.workloads.compute import ComputeFacts
from clusterctl.workloads.gpt_arith import GptShape
from clusterctl.workloads.resnet50 import number, parse_result_line, payload_compute, result_or_finding

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, Inventory, RunDefaults
    from clusterctl.workloads.job import Job

SCRIPT = f"{CONTAINER_PAYLOAD_DIR}/gpt_bench.py"
# A GPU model name that says its memory, e.g. "V100-SXM2-16GB", "H100 80GB HBM3".
_MEMORY_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


# The defaults on CPUs: the tiny model (2 layers of width 128) on 8 sequences of 64 tokens, about 21
# GFLOP a step: seconds on one core (GPT-2 small at 1,024 tokens is 6 TFLOP, minutes). At 128 tokens a
# step took 25 s on the 2-node sandbox of a loaded 2-core machine (80 tokens/s), at 64 6.3 s (164 tokens/s,
# load average about 40: 8 agents' tests beside it), 12 steps of a 5-minute run mostly spent starting.
CPU_DEFAULTS: dict[str, object] = {"framework": "ddp", "model_size": "tiny", "seq_len": 64, "batch_size": 8}
# On GPUs: GPT-2 small at its 1,024 tokens, 8 sequences per device where they fit (halved until they do).
GPU_SIZE, GPU_SEQ_LEN, GPU_BATCH = "124m", 1024, 8


class Gpt(Workload):
    """A GPT-2-style decoder on synthetic tokens, data parallel through DDP or FSDP2."""

    name = "gpt"
    model = "gpt"
    primary_metric = "total_tokens_per_sec"
    description = "clusterctl's PyTorch GPT-2-style transformer benchmark, DDP or FSDP (the image's payload)"

    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """``python gpt_bench.py`` with the run's settings.

        Raises:
            InputError: --framework horovod (the payload trains through torch.distributed only).
        """
        del gpu
        if settings.framework not in ("ddp", "fsdp"):
            raise InputError(
                f"--framework {settings.framework}: gpt runs with --framework ddp or --framework fsdp. "
                "Horovod has no sharded data parallelism, and the transformer workloads it is compared "
                "with train through torch.distributed. Fix: pass --framework ddp or fsdp; where the inventory's "
                "run.framework says horovod (every workload reads run), move it under workloads.resnet50 or "
                "set workloads.gpt.framework: ddp."
            )
        argv = [
            "python",
            SCRIPT,
            f"--framework={settings.framework}",
            f"--model-size={settings.model_size}",
            f"--seq-len={settings.seq_len}",
            f"--batch-size={settings.batch_size}",
            f"--precision={settings.precision}",
            f"--warmup-steps={settings.warmup_steps}",
            f"--steps={settings.steps}",
            f"--display-every={settings.display_every}",
            f"--bucket-cap-mb={settings.bucket_cap_mb:g}",
        ]
        if settings.xla:
            argv.append("--compile")
        if settings.activation_checkpointing:
            argv.append("--activation-checkpointing")
        return argv

    def defaults(self, inventory: Inventory) -> dict[str, object]:
        """DDP with the tiny model on CPUs; GPT-2 small (124M, 1,024 tokens) on GPUs, at the largest batch
        of 8, 4, 2 or 1 whose float32 estimate (``GptShape.memory_bytes``) fits the memory gpus.model
        names (8 where it names none)."""
        if not inventory.primary.gpus.count:
            return dict(CPU_DEFAULTS)
        have = _device_bytes(inventory)
        shape = GptShape.named(GPU_SIZE, GPU_SEQ_LEN)
        batch = GPU_BATCH
        while have is not None and batch > 1 and shape.memory_bytes(batch, "fp32", shards=1) > have:
            batch //= 2
        return {"framework": "ddp", "model_size": GPU_SIZE, "seq_len": GPU_SEQ_LEN, "batch_size": batch}

    def check_plan(self, inventory: Inventory, settings: RunDefaults, world_size: int) -> None:
        """Refuse a model whose estimated memory exceeds the GPU's (when the inventory's gpus.model names
        it, e.g. "A100-SXM4-40GB").

        Raises:
            InputError: the estimate (``GptShape.memory_bytes``) is above the device's memory.
        """
        gpus = inventory.primary.gpus
        have = _device_bytes(inventory)
        if have is None:
            return
        shards = world_size if settings.framework == "fsdp" else 1
        shape = _shape(settings)
        checkpointed = settings.activation_checkpointing
        needed = shape.memory_bytes(
            settings.batch_size, settings.precision, shards=shards, checkpointed=checkpointed
        )
        if needed > have:
            raise InputError(
                f"--model-size {settings.model_size} at --seq-len {settings.seq_len}, --batch-size "
                f"{settings.batch_size}, {settings.framework} on {world_size} device(s): about "
                f"{needed / 1e9:.1f} GB per device ({shape.parameters:,} parameters x 16 B of weights, "
                f"gradients and AdamW state{' sharded' if shards > 1 else ''}, plus activations"
                f"{', checkpointed' if checkpointed else ''}), more than the {have / 1e9:.0f} GB of "
                f"{gpus.model} (inventory gpus.model). Fix: a smaller model, batch or sequence, "
                f"{'' if checkpointed else '--activation-checkpointing, '}or --framework fsdp over more devices"
                f"{_inherited(inventory)}."
            )

    def config_fields(self, settings: RunDefaults) -> dict[str, object]:
        """The model size and sequence length (runs of other shapes are other configurations), and
        activation checkpointing when on (it trades speed for memory: another configuration)."""
        checkpointed = {"activation_checkpointing": True} if settings.activation_checkpointing else {}
        return {"model_size": settings.model_size, "seq_len": settings.seq_len, **checkpointed}

    def gradient_bytes(self, settings: RunDefaults) -> int:
        """DDP: every float32 gradient. FSDP: the allreduce-equivalent of its all-gathers and
        reduce-scatter (``gpt_arith``), so the counter proof and the prediction read it as they read G."""
        shape = _shape(settings)
        if settings.framework == "fsdp":
            return shape.fsdp_equivalent_bytes(settings.precision)
        return shape.ddp_bytes()

    def allreduce_volume(self, settings: RunDefaults) -> Volume:
        """Per run: the step's bytes (DDP's gradients, FSDP's equivalent) x warm-up and measured steps."""
        steps = settings.warmup_steps + settings.steps
        shape = _shape(settings)
        if settings.framework != "fsdp":
            return Volume(
                bytes=shape.ddp_bytes() * steps,
                derivation=f"{shape.parameters:,} parameters x 4 B of gradients x {steps} steps",
            )
        gathered = shape.fsdp_gathered_bytes(settings.precision)
        return Volume(
            bytes=shape.fsdp_equivalent_bytes(settings.precision) * steps,
            derivation=f"FSDP ({gathered:,} B all-gathered + {shape.parameters:,} x 4 B reduce-scattered) "
            f"/ 2 x {steps} steps",
        )

    def read(self, log: str, job: Job) -> Reading:
        """Rank 0's result line parsed once for the metrics, the sanity and the compute facts."""
        result = parse_result_line(log)
        return Reading(
            self._metrics(result),
            self._sanity(result, job),
            parse_breakdown(log),
            self._compute(job.options.settings, result, log),
            {},
        )

    def compute(self, settings: RunDefaults, log: str) -> ComputeFacts:
        """FLOPs per token ``6 N + 12 L W S`` (PaLM appendix B); fp32 on an Ampere or newer GPU is tf32
        (the payload enables it and says so in its result line). Model FLOPs: activation checkpointing's
        recomputed forward is not counted (PaLM's MFU, not its hardware FLOPs utilisation)."""
        return self._compute(settings, parse_result_line(log), log)

    def _compute(self, settings: RunDefaults, result: dict[str, Any] | None, log: str) -> ComputeFacts:
        shape = _shape(settings)
        return payload_compute(
            settings.precision,
            result,
            log,
            float(shape.flops_per_token()),
            f"GPT {settings.model_size} per token: 6 x {shape.parameters - shape.seq_len * shape.width:,} "
            f"parameters + 12 x {shape.layers} layers x {shape.width} width x {shape.seq_len} tokens"
            + (" (the checkpointed recompute not counted)" if settings.activation_checkpointing else ""),
        )

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """PyTorch, which the payload is written in (the paper image has TensorFlow 1.14)."""
        return None if versions.framework == "pytorch" else "PyTorch"

    def metrics(self, log: str) -> dict[str, Metric]:
        """Total and per-device tokens/s, and the peak memory per device, from rank 0's result line."""
        return self._metrics(parse_result_line(log))

    def _metrics(self, found: dict[str, Any] | None) -> dict[str, Metric]:
        result = found or {}
        out = {
            name: Metric(value=value, unit="tokens/s")
            for name in ("total_tokens_per_sec", "tokens_per_sec_per_device")
            if (value := number(result.get(name))) is not None
        }
        peak = number(result.get("peak_memory_bytes"))
        if peak is not None:
            out["peak_memory_gb_per_device"] = Metric(value=peak / 1e9, unit="GB")
        return out

    def breakdown(self, log: str) -> list[RankBreakdown]:
        """Every rank's ``CLUSTERCTL_BREAKDOWN`` line, by rank."""
        return parse_breakdown(log)

    def sanity(self, log: str, plan: Job) -> list[Finding]:
        """The result line echoes the run asked for, and the loss was finite and fell."""
        return self._sanity(parse_result_line(log), plan)

    def _sanity(self, found: dict[str, Any] | None, plan: Job) -> list[Finding]:
        result = result_or_finding(self.name, self.primary_metric, found)
        if isinstance(result, Finding):
            return [result]
        s = plan.options.settings
        return [
            *expect("wrong-model", result.get("model"), self.model, "model"),
            *expect("wrong-model-size", result.get("model_size"), s.model_size, "model size"),
            *expect("wrong-seq-len", result.get("seq_len"), s.seq_len, "sequence length"),
            *expect("wrong-batch-size", result.get("batch_size"), s.batch_size, "batch size per device"),
            *expect("wrong-world-size", result.get("world_size"), plan.world_size, "world size"),
            *expect("wrong-precision", result.get("precision"), s.precision, "precision"),
            *expect("wrong-framework", result.get("framework"), s.framework, "framework"),
            *expect(
                "wrong-checkpointing",
                result.get("activation_checkpointing"),
                s.activation_checkpointing,
                "activation checkpointing",
            ),
            *loss_findings(result.get("loss_first"), result.get("loss_last"), s.warmup_steps + s.steps),
            *_one_shard(s.framework, plan.world_size),
        ]


def _device_bytes(inventory: Inventory) -> int | None:
    """The memory of one of the primary's GPUs, from the GB its gpus.model names; None: no GPU, or unnamed."""
    gpus = inventory.primary.gpus
    found = _MEMORY_IN_NAME.search(gpus.model or "") if gpus.count else None
    return None if found is None else int(found.group(1)) * 10**9


def _inherited(inventory: Inventory) -> str:
    """Where the inventory's run section sets gpt's shape for every workload, a clause saying where it goes."""
    section = inventory.workloads.get("gpt")
    own = section.model_fields_set if section is not None else set()
    fields = sorted((inventory.run.model_fields_set & {"batch_size", "model_size", "seq_len"}) - own)
    if not fields:
        return ""
    named = " and ".join(f"run.{f}" for f in fields)
    return (
        f"; the inventory's {named} {'is' if len(fields) == 1 else 'are'} read by every workload: move "
        f"{'it' if len(fields) == 1 else 'them'} under workloads.<workload> (e.g. workloads.resnet50), or set "
        f"workloads.gpt"
    )


def _shape(settings: RunDefaults) -> GptShape:
    return GptShape.named(settings.model_size, settings.seq_len)


def loss_findings(first: object, last: object, steps: int) -> list[Finding]:
    """An error when the loss of the fixed batch was not a finite number or did not fall from the first
    step to the last (a broken model, optimizer or gradient exchange); nothing to judge with one step."""
    values = [number(first), number(last)]
    if steps < 2 and all(v is not None for v in values):
        return []
    advice = "the numbers measured a model that does not train; read output.log in the run directory"
    if any(v is None or not math.isfinite(v) for v in values):
        return [Finding(severity="error", code="loss-not-finite",
                        message=f"the loss was {first!r} at the first step and {last!r} at the last",
                        advice=advice)]  # fmt: skip
    start, end = (v for v in values if v is not None)
    if not end < start:
        return [Finding(severity="error", code="loss-not-falling",
                        message=f"the loss on the fixed batch went from {start:g} to {end:g} over {steps} steps",
                        advice=advice)]  # fmt: skip
    return []


def _one_shard(framework: str, world_size: int) -> list[Finding]:
    """A warning for FSDP on one rank: nothing is sharded, nothing crosses the fabric."""
    if framework != "fsdp" or world_size > 1:
        return []
    return [
        Finding(
            severity="warning",
            code="fsdp-one-rank",
            message="--framework fsdp on a world size of 1 shards nothing: the run measures one device's "
            "compute plus FSDP's overhead",
            advice="run on 2 or more devices to measure sharding, or --framework ddp for the 1-device baseline",
        )
    ]
