"""nccl-tests across the cluster: the fabric's bus bandwidth, without a model.

``all_reduce_perf`` by default (DDP's and Horovod's gradients); ``run.collective`` (``--op``) picks FSDP's
``all_gather_perf`` or ``reduce_scatter_perf``. Their tables have the same columns and the same parser;
their bus bandwidth counts ``(n-1)/n`` of the array per rank where an allreduce counts ``2(n-1)/n``
(nccl-tests' doc/PERFORMANCE.md), so the proof by counters reads half the array as their
allreduce-equivalent bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.diagnostics.parsers.nccl_tests import NcclTestsOutput, parse_nccl_tests
from clusterctl.diagnostics.rules import separate_jobs_rules
from clusterctl.errors import InputError
from clusterctl.findings import Finding
from clusterctl.workloads.base import Metric, Reading, Volume, Workload, expect, missing_result

if TYPE_CHECKING:
    from clusterctl.inventory import ImageVersions, RunDefaults
    from clusterctl.workloads.job import Job

# Where the GPU profiles of the image build nccl-tests (templates/Dockerfile.j2), and its binary per collective.
BUILD_DIR = "/opt/nccl-tests/build"
BINARIES = {
    "allreduce": "all_reduce_perf",
    "allgather": "all_gather_perf",
    "reducescatter": "reduce_scatter_perf",
}
BINARY = f"{BUILD_DIR}/{BINARIES['allreduce']}"
# The metric of the largest message's bus bandwidth (out-of-place).
LARGE_BUSBW = "bus_bandwidth_at_max_size"
# all_reduce_perf's sizes (8 B to 1 GiB, doubling) and its timed and warm-up iterations per run, given
# explicitly so the volume below does not depend on a release's defaults.
MIN_BYTES, MAX_BYTES = 8, 1 << 30
ITERS, WARMUP_ITERS = 20, 5


def allreduce_equivalent(size: int, collective: str) -> int:
    """The bytes an allreduce would move per node as ``collective`` moves on an array of ``size`` bytes:
    the array for an allreduce (``2(n-1)/n`` of it per node), half of it for an allgather or a
    reduce-scatter (``(n-1)/n`` of it per node)."""
    return size if collective == "allreduce" else size // 2


def _sizes() -> list[int]:
    sizes, size = [], MIN_BYTES
    while size <= MAX_BYTES:
        sizes.append(size)
        size *= 2
    return sizes


class NcclTests(Workload):
    """all_reduce_perf (or all_gather_perf, reduce_scatter_perf) from 8 B to 1 GiB, one GPU per rank."""

    name = "nccl-tests"
    model = "all_reduce_perf"
    primary_metric = "avg_bus_bandwidth"
    description = "NVIDIA nccl-tests all_reduce_perf (needs GPUs and an image built with nccl-tests)"

    def argv(self, settings: RunDefaults, *, gpu: bool) -> list[str]:
        """all_reduce_perf over doubling sizes, one GPU per rank.

        Raises:
            InputError: the run has no GPUs.
        """
        if not gpu:
            raise InputError("nccl-tests needs GPUs; this inventory's nodes have none.")
        return [
            f"{BUILD_DIR}/{BINARIES[settings.collective]}", "-b", str(MIN_BYTES), "-e", str(MAX_BYTES), "-f", "2", "-g", "1",
            "-n", str(ITERS), "-w", str(WARMUP_ITERS),
        ]  # fmt: skip

    def allreduce_volume(self, settings: RunDefaults) -> Volume:
        """Every size, out-of-place and in-place, ``ITERS`` timed times: sum(sizes) x 2 x ITERS (half
        of it for an allgather or a reduce-scatter: ``allreduce_equivalent``).

        nccl-tests' warm-up iterations and its data-check pass move more (how much differs between
        releases: warm-up at the largest size only, or at every size), so they are left out: the
        volume is a lower bound. ``all_reduce_perf``'s own algorithm factor, busbw = algbw x
        2(n-1)/n, is the proof's 2(N-1)/N per node.
        """
        total = sum(_sizes())
        return Volume(
            bytes=allreduce_equivalent(total * 2 * ITERS, settings.collective),
            derivation=f"{total:,} B of sizes x 2 (in/out of place) x {ITERS} iterations"
            + _halved(settings.collective),
        )

    def config_fields(self, settings: RunDefaults) -> dict[str, object]:
        """Another collective than the allreduce is another configuration, and names its binary as
        the model; the allreduce adds nothing (so older records compare equal)."""
        if settings.collective == "allreduce":
            return {}
        return {"collective": settings.collective, "model": self.model_of(settings.collective)}

    def model_of(self, collective: str) -> str:
        """The record's model for ``collective``: nccl-tests' binary."""
        return BINARIES[collective]

    def read(self, log: str, job: Job) -> Reading:
        """The table parsed once for the metrics, the sanity and the bus bandwidth by size."""
        parsed = parse_nccl_tests(log)
        return Reading(self._metrics(parsed), self._sanity(parsed, job), [], None, self._by_size(parsed))

    def bus_bandwidth_by_size(self, log: str) -> dict[int, float]:
        """The out-of-place bus bandwidth (GB/s) per message size (bytes) the run measured."""
        return self._by_size(parse_nccl_tests(log))

    def _by_size(self, parsed: NcclTestsOutput) -> dict[int, float]:
        return {row.size: row.busbw for row in parsed.rows if row.busbw is not None}

    def image_lacks(self, versions: ImageVersions) -> str | None:
        """CUDA and nccl-tests, which GPU images build when image.versions.nccl_tests names a tag."""
        if not versions.cuda:
            return "CUDA"
        return None if versions.nccl_tests else "nccl-tests (image.versions.nccl_tests is unset)"

    def metrics(self, log: str) -> dict[str, Metric]:
        """Average, peak and largest-message bus bandwidth (GB/s) and the out-of-bounds count.

        The largest message's (``LARGE_BUSBW``) is what a training run's big fused gradient buffers
        see: the preflight threshold and the throughput prediction use it.
        """
        return self._metrics(parse_nccl_tests(log))

    def _metrics(self, parsed: NcclTestsOutput) -> dict[str, Metric]:
        metrics: dict[str, Metric] = {}
        largest = max(
            (row for row in parsed.rows if row.busbw is not None), key=lambda r: r.size, default=None
        )
        if largest is not None and largest.busbw is not None:
            metrics[LARGE_BUSBW] = Metric(value=largest.busbw, unit="GB/s")
        if parsed.avg_bus_bandwidth_gb_per_s is not None:
            metrics["avg_bus_bandwidth"] = Metric(value=parsed.avg_bus_bandwidth_gb_per_s, unit="GB/s")
        if parsed.peak_bus_bandwidth_gb_per_s is not None:
            metrics["peak_bus_bandwidth"] = Metric(value=parsed.peak_bus_bandwidth_gb_per_s, unit="GB/s")
        if parsed.out_of_bounds is not None:
            metrics["out_of_bounds"] = Metric(value=parsed.out_of_bounds, unit="values")
        return metrics

    def sanity(self, log: str, plan: Job) -> list[Finding]:
        """The average was printed, no value was out of bounds and every rank listed its device."""
        return self._sanity(parse_nccl_tests(log), plan)

    def _sanity(self, parsed: NcclTestsOutput, plan: Job) -> list[Finding]:
        if parsed.avg_bus_bandwidth_gb_per_s is None:
            return [missing_result(self.name, "`# Avg bus bandwidth` line")]
        findings: list[Finding] = []
        if parsed.out_of_bounds or parsed.out_of_bounds_ok is False:
            findings.append(
                Finding(
                    severity="error",
                    code="nccl-out-of-bounds",
                    message=f"all_reduce_perf found {parsed.out_of_bounds} out-of-bounds values",
                    advice="the reduction gave wrong results: suspect a GPU, the driver or GPUDirect; rerun per node",
                )
            )
        findings += separate_jobs_rules(parsed)
        if parsed.ranks:
            findings += expect("wrong-world-size", parsed.ranks, plan.world_size, "ranks")
        return findings


def _halved(collective: str) -> str:
    """How ``allreduce_equivalent`` counted ``collective``, for a volume's derivation."""
    return "" if collective == "allreduce" else f" / 2 ({collective}: (n-1)/n of the array per node)"
