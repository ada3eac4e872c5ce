"""tf_cnn_benchmarks output: the run's settings, step throughput and the final total.

Under Horovod every rank prints a ``total images/sec`` that is already an extrapolated cluster-wide
number, so the total is rank 0's (or, untagged, the last such line); ranks are never summed
(tensorflow/benchmarks#232, horovod#466).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import Parsed, split_tag, to_float, to_int

# Possessive \s++ and a greedy value (stripped after): a line of blanks after "Key:" was quadratic.
_SETTING = re.compile(r"^([A-Z][A-Za-z0-9 _]*?):\s++(\S.*)$")
_PER_DEVICE = re.compile(r"^\s*(\d+)\s+per device\s*$")
_STEP = re.compile(
    r"^\s*(\d+)\s+images/sec:\s*([\d.]+)\s*\+/-\s*([\d.]+)\s*\(jitter\s*=\s*([\d.]+)\)\s*(.*)$"
)
_TOTAL = re.compile(r"^\s*total images/sec:\s*([\d.]+)")
# Lines every run prints that carry nothing we read: TF/absl log lines, banners, separators.
_NOISE = re.compile(
    r"^\s*(?:-{5,}|={5,}|\.\.\.|Step\s+Img/sec|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.\d]*: [IWEF] |"
    r"[IWEF]\d{4} \d\d:|WARNING:|Instructions for updating|Done warm up|Running warm up|"
    r"Generating (?:training )?model|Initializing graph|Running benchmark|Finished|"
    r"TensorFlow:\s|Use standard file|tf\.|To enable)"
)


class TfStep(BaseModel):
    """One step line: ``<step> images/sec: <x> +/- <err> (jitter = <j>) <loss...>``."""

    step: int
    images_per_sec: float
    rank: int | None = Field(None, description="MPI rank from a --tag-output prefix, if any.")


class TfCnnBenchmarksOutput(Parsed):
    """What a tf_cnn_benchmarks run printed."""

    model: str | None = Field(None, description="Model name echoed back, e.g. resnet50.")
    batch_size_per_device: int | None = Field(None, description="Per-device batch size.")
    batch_size_global: int | None = Field(None, description="Global batch size, if printed.")
    num_gpus: int | None = Field(None, description="Devices listed in `Devices:`, if shown.")
    variable_update: str | None = Field(None, description="`Variables:` setting (horovod, replicated, ...).")
    total_images_per_sec: float | None = Field(
        None, description="Rank 0's (or the final) `total images/sec`; never a sum over ranks."
    )
    total_lines: int = Field(0, description="How many `total images/sec` lines were seen (one per rank).")
    steps: list[TfStep] = Field(default_factory=list, description="Step throughput lines.")
    settings: dict[str, str] = Field(default_factory=dict, description="The header block, key: value.")


def parse_tf_cnn_benchmarks(text: str) -> TfCnnBenchmarksOutput:
    """Parse tf_cnn_benchmarks stdout (optionally with Open MPI or horovodrun rank tags).

    Args:
        text: The log, as printed.

    Returns:
        The settings, steps and rank 0's total; ``unparsed_lines`` lists lines not recognised.
    """
    result = TfCnnBenchmarksOutput()
    totals: list[tuple[int | None, float]] = []
    last_key = ""
    for raw in text.splitlines():
        rank, line = split_tag(raw)
        if not line.strip():
            continue
        if (m := _TOTAL.match(line)) and (total := to_float(m.group(1))) is not None:
            totals.append((rank, total))
        elif (m := _STEP.match(line)) and None not in (step := (to_int(m.group(1)), to_float(m.group(2)))):
            result.steps.append(TfStep(step=step[0], images_per_sec=step[1], rank=rank))
        elif (m := _PER_DEVICE.match(line)) and last_key == "Batch size":
            result.batch_size_per_device = to_int(m.group(1))
        elif _NOISE.match(line):
            continue
        elif m := _SETTING.match(line):
            last_key = m.group(1)
            result.settings.setdefault(last_key, m.group(2).rstrip())
        else:
            result.unparsed_lines.append(raw)
    _apply_settings(result)
    result.total_lines = len(totals)
    result.total_images_per_sec = _rank0_total(totals)
    return result


def _apply_settings(result: TfCnnBenchmarksOutput) -> None:
    settings = result.settings
    result.model = settings.get("Model")
    result.variable_update = settings.get("Variables")
    batch = settings.get("Batch size", "")
    if m := re.match(r"(\d+)\s+global", batch):
        result.batch_size_global = to_int(m.group(1))
    elif (m := re.match(r"(\d+)\s+per device", batch)) and result.batch_size_per_device is None:
        result.batch_size_per_device = to_int(m.group(1))
    devices = settings.get("Devices")
    if devices:
        result.num_gpus = len(re.findall(r"'[^']*'", devices)) or None
    if result.batch_size_per_device is None and result.batch_size_global and result.num_gpus:
        result.batch_size_per_device = result.batch_size_global // result.num_gpus


def _rank0_total(totals: list[tuple[int | None, float]]) -> float | None:
    """Rank 0's total when ranks are tagged, else the last total line."""
    tagged = [value for rank, value in totals if rank == 0]
    if tagged:
        return tagged[-1]
    return totals[-1][1] if totals else None
