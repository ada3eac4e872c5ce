"""The active tiers of `check health --level`, pure: what each tier runs, how long it may take, and the
findings of what it measured.

- ``quick``: the passive checks only (``clusterctl.diagnostics.health``).
- ``standard``: also, in the same one script per node, the host-to-GPU copy bandwidth of every GPU
  (``nvbandwidth -t host_to_device_memcpy_ce``) and DCGM's diagnostics at run level 2 (``dcgmi diag -r
  2``, where DCGM is installed); then a single-node collective on every node, one node after another,
  through the run conductor (nccl-tests over the node's GPUs; the payload's CPU allreduce on 2 ranks
  otherwise).
- ``burn-in``: DCGM at run level 3 instead, and the collective sustained: more runs, every message size.

A check that applies to a node but could not look (a GPU node without nvbandwidth, a collective that
failed to start) leaves the node ``unknown``, never healthy; a check that does not apply (no GPU, no
DCGM installed) is reported as ``unknown`` with its reason and does not count against the node.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from clusterctl.diagnostics.collectors import Collector
from clusterctl.diagnostics.parsers.dcgmi_diag import DcgmDiag
from clusterctl.diagnostics.parsers.nvbandwidth import NvBandwidth
from clusterctl.findings import Finding

Level = Literal["quick", "standard", "burn-in"]
LEVELS: tuple[Level, ...] = ("quick", "standard", "burn-in")
# Every dcgmi exit status is an answer (it exits non-zero when a test fails); the table says which.
# Not: 124 (timed out), 126/127 (cannot run / not installed), 137 (killed).
_DCGMI_EXITS = frozenset(range(256)) - {124, 126, 127, 137}
H2D_KEY, DCGM_KEY = "h2d-bandwidth", "dcgmi-diag"
# Keys whose tool is optional: not installed is no failure to look (DCGM is installed where a site runs it).
OPTIONAL_KEYS = frozenset({DCGM_KEY})
# A GPU below this fraction of the median of its node's GPUs copies slowly (a link trained down, a
# GPU behind the wrong switch); on a healthy node they are within a few percent (23.9-26.4 GB/s on 8
# RTX 4090s, nvbandwidth issue 15).
H2D_TOLERANCE = 0.5


@dataclass(frozen=True)
class Tier:
    """What one level adds to the passive checks and its bounds (seconds)."""

    dcgm_run_level: int | None
    dcgm_s: int
    h2d_s: int
    collective_runs: int
    collective_s: int
    all_sizes: bool

    def collectors(self) -> tuple[Collector, ...]:
        """The per-node commands this tier adds to the health script, each under its own bound."""
        if self.dcgm_run_level is None:
            return ()
        h2d = ("nvbandwidth", "-t", "host_to_device_memcpy_ce")
        dcgm = ("dcgmi", "diag", "-r", str(self.dcgm_run_level))
        return (
            Collector(H2D_KEY, h2d, "nvbandwidth", "gpu", timeout_s=self.h2d_s),
            Collector(DCGM_KEY, dcgm, "dcgmi-diag", "gpu", _DCGMI_EXITS, timeout_s=self.dcgm_s),
        )

    def script_s(self) -> int:
        """The most the tier's per-node commands add to the collection (0: none)."""
        return (self.h2d_s + self.dcgm_s) if self.dcgm_run_level is not None else 0

    def collective_bound_s(self, nodes: int) -> int:
        """The most the collectives take on ``nodes`` nodes (one node after another)."""
        return nodes * self.collective_runs * self.collective_s


TIERS: dict[Level, Tier] = {
    "quick": Tier(None, 0, 0, 0, 0, all_sizes=False),
    # DCGM's level 2 takes 2-3 minutes on 8 GPUs; nvbandwidth's one testcase seconds.
    "standard": Tier(2, 600, 120, 1, 120, all_sizes=False),
    # Level 3 takes about 30 minutes on 8 GPUs (DCGM's user guide: "Long"); the collective runs 5 times.
    "burn-in": Tier(3, 3600, 120, 5, 600, all_sizes=True),
}


def dcgm_findings(diag: DcgmDiag, node: str) -> list[Finding]:
    """An error per failed DCGM test (with its warning text); none when all passed or were skipped."""
    return [
        Finding(
            severity="error",
            code="dcgm-diag-fail",
            message=f"DCGM diagnostic {test.category}/{test.name}: {test.result}"
            + (f" ({test.detail[:200]})" if test.detail else ""),
            advice="Drain the node, then follow DCGM's message (reset the GPU, reseat it, check its links) and "
            "run `dcgmi diag -r 3` again; call the vendor if it fails again.",
            node=node,
        )
        for test in diag.tests
        if test.failed
    ]


def h2d_unknown(bandwidth: NvBandwidth, node: str, gpus: int) -> list[Finding]:
    """A warning (code ``h2d-bandwidth-unknown``) when nvbandwidth measured nothing, left a figure
    unreadable, or measured fewer than the node's ``gpus`` GPUs: what it did not measure is unknown."""
    if not bandwidth.gpus:
        why = "printed no host-to-GPU figure" + (" (only its header)" if bandwidth.testcase else "")
    elif bandwidth.unparsed_lines:
        why = f"printed {len(bandwidth.unparsed_lines)} lines that could not be read as figures"
    elif len(bandwidth.gpus) < gpus:
        why = f"measured {len(bandwidth.gpus)} GPUs of the {gpus} the inventory gives this node"
    else:
        return []
    return [
        Finding(
            severity="warning",
            code="h2d-bandwidth-unknown",
            message=f"nvbandwidth {why}, so the host-to-GPU copy bandwidth is unknown",
            advice="Run `nvbandwidth -t host_to_device_memcpy_ce` on the node by hand to see why (a GPU it "
            "cannot open, a build without the testcase).",
            node=node,
        )
    ]


def h2d_findings(bandwidth: NvBandwidth, node: str) -> list[Finding]:
    """An info line with every GPU's copy rate, and a warning per GPU below ``H2D_TOLERANCE`` of the
    median of the node's GPUs (none when nothing was measured: ``h2d_unknown`` says so)."""
    if not bandwidth.gpus:
        return []
    median = statistics.median(bandwidth.gpus.values())
    rates = ", ".join(f"GPU{gpu} {rate:.3g}" for gpu, rate in sorted(bandwidth.gpus.items()))
    found = [
        Finding(
            severity="info",
            code="h2d-bandwidth",
            message=f"host-to-GPU copy ({bandwidth.testcase}): {rates} GB/s",
            node=node,
        )
    ]
    found += [
        Finding(
            severity="warning",
            code="h2d-bandwidth-low",
            message=f"GPU{gpu} copies from the host at {rate:.3g} GB/s, below {H2D_TOLERANCE:.0%} of the "
            f"median of this node's GPUs ({median:.3g} GB/s)",
            advice="Check the GPU's PCIe link (`nvidia-smi -q -d PCI`: generation and width against the "
            "maximum) and reseat it if it trained down; check that its process runs on the GPU's NUMA node.",
            node=node,
        )
        for gpu, rate in sorted(bandwidth.gpus.items())
        if rate < median * H2D_TOLERANCE
    ]
    return found


def missing_dcgm_table(diag: DcgmDiag, node: str) -> list[Finding]:
    """A warning when dcgmi ran but printed no test, or skipped every test: its run level did not run
    (no host engine, ...), so nothing was measured."""
    if any(not test.skipped for test in diag.tests):
        return []
    what = f"skipped all {len(diag.tests)} of its tests" if diag.tests else "printed no test result"
    return [
        Finding(
            severity="warning",
            code="dcgm-diag-unknown",
            message=f"dcgmi diag {what}, so DCGM's diagnostics are unknown",
            advice="Start DCGM's host engine (`systemctl start nvidia-dcgm`) and run `dcgmi diag -r 2` by hand "
            "to see why.",
            node=node,
        )
    ]


@dataclass(frozen=True)
class NodeCollective:
    """One node's single-node collective: its runs' bus bandwidth (GB/s, 0: failed), why runs failed,
    and their run directories; ``started`` False when it could not be started at all (the node's
    container or engine unreachable), which makes it unknown rather than failed."""

    node: str
    samples: tuple[float, ...]
    failures: tuple[str, ...]
    run_dirs: tuple[str, ...]
    started: bool = True

    @property
    def busbw(self) -> float:
        """The median of the runs (0 when every run failed; NaN when a run's figure is not a finite
        number: what it measured is unknown)."""
        if not all(math.isfinite(s) for s in self.samples):
            return math.nan
        return statistics.median(self.samples) if self.samples else 0.0

    @property
    def measured(self) -> bool:
        """Whether it started and every figure is a finite number (a failed run's 0 included)."""
        return self.started and math.isfinite(self.busbw)


def collective_findings(
    results: list[NodeCollective], reference: float | None, basis: str, tolerance: float = 0.5
) -> list[Finding]:
    """Per node: an error when its collective failed, a warning when it is below ``reference x (1 -
    tolerance)`` (``reference``: the baseline; None: the median of the other nodes, from 3 nodes on,
    since two cannot be told apart), an info line with its figure otherwise."""
    found = []
    for result in results:
        peers = [r.busbw for r in results if r.node != result.node and r.measured]
        floor_of = (
            reference if reference is not None else (statistics.median(peers) if len(peers) >= 2 else None)
        )
        why = basis if reference is not None else "the median of the other nodes"
        if not result.started:
            found.append(
                Finding(
                    severity="warning",
                    code="collective-unknown",
                    message="the single-node collective could not start: " + "; ".join(result.failures),
                    advice="Start the benchmark containers (`clusterctl up`) and check the node is reachable.",
                    node=result.node,
                )
            )
        elif not result.measured:
            found.append(
                Finding(
                    severity="warning",
                    code="collective-unknown",
                    message="the single-node collective gave no figure that is a number ("
                    + ", ".join(f"{s:g}" for s in result.samples)
                    + " GB/s), so what it measured is unknown",
                    advice="Read the run directory's output: the benchmark printed a bandwidth it could not "
                    "have measured.",
                    node=result.node,
                )
            )
        elif result.busbw <= 0:
            found.append(
                Finding(
                    severity="error",
                    code="collective-failed",
                    message="the single-node collective failed: "
                    + ("; ".join(result.failures) or "no figure"),
                    advice="Read the run directory's output; `clusterctl up` must have started the benchmark "
                    "container, and the node's GPUs or ranks must be usable.",
                    node=result.node,
                )
            )
        elif floor_of is not None and result.busbw < floor_of * (1 - tolerance):
            found.append(
                Finding(
                    severity="warning",
                    code="collective-slow",
                    message=f"single-node collective {result.busbw:.3g} GB/s, below {1 - tolerance:.0%} of "
                    f"{floor_of:.3g} GB/s ({why})",
                    advice="Look at this node's GPUs (NVLink, clocks, `check health` findings) or CPUs (load, "
                    "frequency); `check pairs` tells a node from its links.",
                    node=result.node,
                )
            )
        else:
            found.append(
                Finding(
                    severity="info",
                    code="collective",
                    message=f"single-node collective {result.busbw:.3g} GB/s"
                    + (f" (reference {floor_of:.3g} GB/s, {why})" if floor_of is not None else ""),
                    node=result.node,
                )
            )
    return found
