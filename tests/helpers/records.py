"""Run records for the tests of the report, its plot and HTML page, history, prediction and explain:
one builder of a judged record (``record``) with the configurations the tests use, and the whitepaper's
runs."""

from __future__ import annotations

from datetime import UTC, datetime

from clusterctl.results.nccl_log_proof import FabricProof
from clusterctl.results.record import RunConfig, RunRecord
from clusterctl.workloads.base import Metric

V100 = RunConfig(
    workload="tf_cnn_benchmarks",
    model="resnet50",
    framework="horovod",
    precision="fp16",
    batch_size=256,
    image_size=224,
    image_profile="paper-2020",
    device="V100-SXM2-16GB",
)

# A CPU run of the sandbox (a socket fabric, as its ethernet asks).
SOCKET = FabricProof(fabric_kind="ethernet", transport="socket", gdr=False, valid=True)


def cpu_config(batch_size: int, device: str = "cpu") -> RunConfig:
    """The configuration of a ResNet-50 DDP run on the sandbox's CPU image."""
    return RunConfig(workload="resnet50", model="resnet50", framework="ddp", precision="fp32",
                     batch_size=batch_size, image_size=64, image_profile="cpu", device=device)  # fmt: skip


def record(
    run_id: str,
    devices: int,
    value: float,
    *,
    valid: bool = True,
    config: RunConfig = V100,
    fabric: FabricProof | None = None,
    unit: str = "img/s",
) -> RunRecord:
    """A judged run of ``devices`` devices (2 nodes past 4) whose primary metric, images per second, is
    ``value``; its fabric proof ``fabric``, or InfiniBand with GPUDirect, valid as the run."""
    return RunRecord(
        run_id=run_id,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        config=config,
        nodes=1 if devices <= 4 else 2,
        world_size=devices,
        exit_code=0,
        primary_metric="total_images_per_sec",
        metrics={"total_images_per_sec": Metric(value=value, unit=unit)},
        fabric=fabric or FabricProof(fabric_kind="infiniband", transport="NET/IB", gdr=True, valid=valid),
        findings=[],
        valid=valid,
    )


# The whitepaper's cluster: 1 GPU 640 img/s; 4 GPUs 2496 (3.9x); 8 GPUs 4419.71 (horovod#288).
PAPER_RUNS = [
    record("a", 1, 630.0),
    record("b", 1, 640.0),
    record("c", 1, 650.0),
    record("d", 4, 2496.0),
    record("e", 8, 4419.71),
    record("f", 8, 1000.0, valid=False),  # a socket-fallback run never enters the numbers
]
