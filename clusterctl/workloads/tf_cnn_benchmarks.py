"""The whitepaper's own benchmark: tensorflow/benchmarks' tf_cnn_benchmarks.py under Horovod.

For users with the paper-2020 image (TensorFlow 1.14, the script cloned to /benchmarks). The flags
are the whitepaper's multi-node command's, derived from the run settings; the total is rank 0's
``total images/sec`` (already cluster-wide; ranks are never summed).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from clusterctl.data.tfrecord import SHARDS_DIR
from clusterctl.diagnostics.model import untangled
from clusterctl.diagnostics.parsers.tf_cnn_benchmarks import TfCnnBenchmarksOutput, parse_tf_cnn_benchmarks
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.workloads.base import Metric, Reading, Workload, expect, missing_result
from clusterctl.workloads.compute import ComputeFacts
from clusterctl.workloads.flops import resnet50_forward_macs, training_flops

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, Inventory, RunDefaults
    from clusterctl.workloads.job import Job

SCRIPT = "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py"
# tf_cnn_benchmarks' model registry name (the whitepaper's prose calls it ResNet-50).
MODEL = "resnet50"
# Trainable parameters of tf_cnn_benchmarks' resnet50: the torchvision layout (its batch norms keep
# scale and offset, models/resnet_model.py `'scale': True`; convolutions have no bias) with a 1001-way
# classifier, as its datasets.py gives ImageNet 1001 classes: 25,557,032 + 2048 + 1.
PARAMETERS = 25_559_081
# Its resnet50 model: v1 (stride on a block's first 1x1, models/resnet_model.py bottleneck_block_v1) at
# the model's own 224x224 (ResnetModel's image size; no flag changes it), 1001 classes.
IMAGE_SIZE = 224
CLASSES = 1001


def tfrecord_dir(settings: RunDefaults) -> str | None:
    """The TFRecord directory ``--data_dir`` names: ``run.data_dir`` when set, else run.data's
    ``tfrecords/`` (what `data synth --tfrecords` writes beside the JPEGs); None: synthetic data."""
    if settings.data_dir:
        return str(settings.data_dir)
    if settings.data != "synthetic":
        return posixpath.join(settings.data, SHARDS_DIR)
    return None


class TfCnnBenchmarks(Workload):
    """tf_cnn_benchmarks ResNet-50 with --variable_update=horovod, as in the whitepaper."""

    name = "tf_cnn_benchmarks"
    model = MODEL
    primary_metric = "total_images_per_sec"
    description = "tensorflow/benchmarks tf_cnn_benchmarks.py (the whitepaper's script; paper-2020 image)"
    reads_tfrecords = True

    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """The whitepaper's tf_cnn_benchmarks flags for these settings.

        Raises:
            InputError: settings tf_cnn_benchmarks cannot run (DDP, bf16).
        """
        if settings.framework != "horovod":
            raise InputError(
                f"tf_cnn_benchmarks runs under Horovod only; drop --framework {settings.framework}."
            )
        if settings.precision == "bf16":
            raise InputError("tf_cnn_benchmarks has no bf16 mode; use --precision fp16 or fp32.")
        device = "gpu" if gpu else "cpu"
        argv = [
            "python",
            SCRIPT,
            f"--device={device}",
            f"--data_format={settings.data_format}",
            f"--optimizer={settings.optimizer}",
            "--distortions=false",
            f"--use_fp16={settings.precision == 'fp16'}",
            f"--local_parameter_device={device}",
            "--variable_update=horovod",
            f"--horovod_device={device}",
            "--datasets_num_private_threads=4",
        ]
        if data_dir := tfrecord_dir(settings):
            argv += [f"--data_dir={data_dir}", "--data_name=imagenet"]
        argv += [
            f"--display_every={settings.display_every}",
            f"--model={MODEL}",
            f"--batch_size={settings.batch_size}",
            f"--xla={settings.xla}",
            f"--num_warmup_batches={settings.warmup_steps}",
            f"--num_batches={settings.steps}",
        ]
        return argv

    def gradient_bytes(self, settings: RunDefaults) -> int:
        """Every trainable variable's gradient, float32, all-reduced by Horovod each step.

        ``--use_fp16`` computes in float16 but keeps float32 variables (fp16_vars is off), so the
        gradients Horovod all-reduces (``hvd.allreduce(grad)`` in benchmark_cnn.py, no compression)
        stay float32; Horovod's fusion buffer batches them into fewer, larger messages without
        changing their bytes.
        """
        del settings
        return PARAMETERS * 4

    def compute(self, settings: RunDefaults, log: str) -> ComputeFacts:
        """ResNet-50 v1 at 224x224 with 1001 classes, counted layer by layer (``flops``); the math
        precision is the run's (the paper image's TensorFlow 1.14 predates TF32)."""
        del log
        macs = resnet50_forward_macs(IMAGE_SIZE, num_classes=CLASSES, stride_on_3x3=False)
        return ComputeFacts(
            flops_per_sample=training_flops(macs),
            derivation=f"ResNet-50 v1 at {IMAGE_SIZE}x{IMAGE_SIZE}, {CLASSES} classes: {macs:,} MACs forward "
            "x 2 FLOPs x 3 (forward + backward)",
            precision=settings.precision,
        )

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """TensorFlow and the tensorflow/benchmarks clone at /benchmarks (image.versions.tf_benchmarks_branch)."""
        if versions.framework != "tensorflow":
            return "TensorFlow"
        if not versions.tf_benchmarks_branch:
            return "tensorflow/benchmarks (image.versions.tf_benchmarks_branch is unset)"
        return None

    def read(self, log: str, job: Job) -> Reading:
        """The output parsed once for the metrics and the sanity."""
        parsed = parse_tf_cnn_benchmarks(untangled(log))
        return Reading(
            self._metrics(parsed), self._sanity(parsed, job), [], self.compute(job.options.settings, log), {}
        )

    def metrics(self, log: str) -> dict[str, Metric]:
        """Rank 0's total img/s and the per-device share of it."""
        return self._metrics(parse_tf_cnn_benchmarks(untangled(log)))

    def _metrics(self, parsed: TfCnnBenchmarksOutput) -> dict[str, Metric]:
        if parsed.total_images_per_sec is None:
            return {}
        metrics = {"total_images_per_sec": Metric(value=parsed.total_images_per_sec, unit="img/s")}
        if parsed.total_lines:
            per_device = parsed.total_images_per_sec / parsed.total_lines
            metrics["images_per_sec_per_device"] = Metric(value=per_device, unit="img/s")
        return metrics

    def sanity(self, log: str, plan: Job) -> list[Finding]:
        """A total was printed, for the model and batch asked, by one rank per device."""
        return self._sanity(parse_tf_cnn_benchmarks(untangled(log)), plan)

    def _sanity(self, parsed: TfCnnBenchmarksOutput, plan: Job) -> list[Finding]:
        if parsed.total_images_per_sec is None:
            return [missing_result(self.name, "`total images/sec` line")]
        return [
            *expect("wrong-model", parsed.model, MODEL, "model"),
            *expect(
                "wrong-batch-size",
                parsed.batch_size_per_device,
                plan.options.settings.batch_size,
                "batch size per device",
            ),
            # Under Horovod every rank prints its own total line.
            *expect("wrong-world-size", parsed.total_lines, plan.world_size, "ranks printing a total"),
        ]

    def forwarded_env(self, inventory: Inventory) -> list[str]:
        """LD_PRELOAD on the paper-2020 image: TF 1.14 + Horovod need libhwloc preloaded (horovod#1123)."""
        return ["LD_PRELOAD"] if inventory.image.profile == "paper-2020" else []
