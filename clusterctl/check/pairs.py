"""`clusterctl check pairs`: the collective on node groups, to name the slow node (issue 27).

The effectful half of pairwise isolation (the pure half is ``clusterctl.diagnostics.pairs``). Each
group runs the collective `run --preflight` runs (nccl-tests on GPUs, the payload's CPU allreduce
otherwise) through the conductor, ``repeats`` times, each run bounded by ``timeout_s`` and recorded in
the runs directory like any run; its figure is the bus bandwidth at the largest size, a failed or
timed-out run counting 0. A group runs as an inventory of its own nodes, the first one primary (over
ssh its container starts mpirun), on the inventory's default launcher or the one asked for (under
Slurm a job pinned to exactly the group's nodes), over ssh without the topology snapshot (`check
topology` takes it).

Two searches: ``all`` measures every pair (n(n-1)/2 groups) and judges every node by the median of its
pairs against the baseline or its peers; ``halving`` compares halves with each other (ClusterKit's
way, two groups a round: at most 2 ceil(log2 n) + 3), so neither a baseline nor a pair's figure is
needed, and groups of one size are only ever set against each other.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clusterctl.diagnostics.junit import Case, check_cases
from clusterctl.diagnostics.pairs import (
    HALVING_MIN_NODES,
    Halving,
    NodeVerdict,
    SlowLink,
    Verdict,
    all_pairs,
    halving_search,
    judge_all_pairs,
    launch_order,
)
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.results.baselines import BUSBW_METRIC, Baseline, baselines_for, find_baseline, hardware_config
from clusterctl.results.record import RunRecord
from clusterctl.run.context import RunContext
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.allreduce import Allreduce
from clusterctl.workloads.base import Workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.job import Job
from clusterctl.workloads.nccl_tests import LARGE_BUSBW

Search = Literal["auto", "all", "halving"]
SCHEMA = "clusterctl.check-pairs/1"
# Up to this many nodes `auto` measures all pairs (28 groups); above it, the halving search.
ALL_PAIRS_UP_TO = 8
# The CPU allreduce measures 4 MiB only (of 1-64 MiB): a pair's run is mostly start-up, a slow node shows
# at every size, and the verdict reads the largest size's bus bandwidth, so the 1 and 2 MiB rows were
# 3/7 of the bytes moved for nothing (a slow link's pair took that much longer); nccl-tests keeps its
# sizes, the baselines being figures at the large ones.
CPU_MAX_BYTES = 1 << 22


@dataclass(frozen=True)
class Group:
    """One group measured: its nodes, each run's bus bandwidth (GB/s; 0: the run failed), why runs
    failed, and their run directories."""

    nodes: tuple[str, ...]
    samples: tuple[float, ...]
    failures: tuple[str, ...]
    run_dirs: tuple[str, ...]

    @property
    def median(self) -> float:
        """The median of the samples: one noisy run does not move it."""
        return statistics.median(self.samples)


@dataclass
class PairsReport:
    """What `check pairs` found: the search used, the reference, every node's verdict, the slow links
    and every group measured, in order."""

    search: Literal["all", "halving"]
    repeats: int
    tolerance: float
    baseline: Baseline | None
    nodes: list[NodeVerdict] = field(default_factory=list)
    links: list[SlowLink] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    @property
    def named(self) -> list[str]:
        """The nodes and links named: what makes the command fail."""
        return [v.node for v in self.nodes if v.verdict != "ok"] + ["-".join(s.pair) for s in self.links]

    def junit_cases(self) -> list[Case]:
        """The JUnit testcases: one per node (failed when named), one failed per slow link."""
        failed = {
            v.node: None if v.verdict == "ok" else f"{v.verdict.upper()} {v.summary()}" for v in self.nodes
        }
        links = [
            Case(f"link {' - '.join(s.pair)}", "clusterctl.check-pairs", f"SLOW LINK {s.summary()}")
            for s in self.links
        ]
        return check_cases("check-pairs", failed, []) + links

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (``schema`` names its version; bandwidths in GB/s)."""
        return {
            "schema": SCHEMA,
            "search": self.search,
            "repeats": self.repeats,
            "tolerance": self.tolerance,
            "baseline": self.baseline.model_dump() if self.baseline else None,
            "nodes": [
                {
                    "node": v.node,
                    "verdict": v.verdict,
                    "busbw_gb_s": v.busbw,
                    "reference_gb_s": v.reference,
                    "basis": v.basis,
                }
                for v in self.nodes
            ],
            "links": [
                {"nodes": list(s.pair), "busbw_gb_s": s.busbw, "reference_gb_s": s.reference}
                for s in self.links
            ],
            "groups": [
                {
                    "nodes": list(g.nodes),
                    "samples_gb_s": list(g.samples),
                    "median_gb_s": g.median,
                    "failures": list(g.failures),
                    "run_dirs": list(g.run_dirs),
                }
                for g in self.groups
            ],
        }


Measure = Callable[[Sequence[str]], Group]
"""Runs the collective on a group of nodes ``repeats`` times; the group measured."""


def pairs_baseline(inventory: Inventory, baselines: list[Baseline]) -> Baseline | None:
    """The baseline of a 2-node collective on this inventory's hardware, if the data has one."""
    return find_baseline(BUSBW_METRIC, hardware_config(inventory, 2), baselines)


def check_pairs(
    inventory: Inventory,
    measure: Measure,
    *,
    search: Search = "auto",
    repeats: int = 3,
    tolerance: float = 0.5,
    baseline: Baseline | None = None,
) -> PairsReport:
    """Measure node groups with ``measure`` and judge every node (and, with all pairs, every link).

    ``baseline`` (None: judge against the cluster's own median) sets the all-pairs search's reference;
    the halving search compares halves with each other. ``tolerance`` is the fraction below the
    reference still healthy.

    Raises:
        InputError: the halving search on fewer than ``HALVING_MIN_NODES`` nodes (before any run).
    """
    names = [n.name for n in inventory.nodes]
    chosen: Literal["all", "halving"] = (
        search if search != "auto" else ("all" if len(names) <= ALL_PAIRS_UP_TO else "halving")
    )
    report = PairsReport(chosen, repeats, tolerance, baseline)

    def measured(group: Sequence[str]) -> Group:
        result = measure(group)
        report.groups.append(result)
        return result

    if chosen == "all":
        medians = {pair: measured(launch_order(names, pair)).median for pair in all_pairs(names)}
        report.nodes, report.links = judge_all_pairs(medians, tolerance, baseline.value if baseline else None)
        return report
    if len(names) < HALVING_MIN_NODES:
        raise InputError(
            f"--search halving compares halves of 2 nodes or more, so it needs {HALVING_MIN_NODES} nodes; "
            f"inventory {inventory.cluster.name!r} has {len(names)}. Fix: use --search all (or auto)."
        )
    halving = halving_search(names, lambda group: measured(group).median, tolerance)
    report.nodes = _halving_verdicts(names, halving)
    return report


def _halving_verdicts(names: Sequence[str], halving: Halving) -> list[NodeVerdict]:
    """Each node's verdict from the comparisons: its figure is that of the last group it was in
    (the named node's: its pair with a cleared node), against the group it was compared with."""
    last: dict[str, tuple[float, float, str]] = {}
    for c in halving.comparisons:
        for node in c.slower:
            last[node] = (c.slower_busbw, c.faster_busbw, c.basis)
        for node in c.faster:
            last[node] = (c.faster_busbw, c.slower_busbw, c.basis)
    verdicts = []
    for node in names:
        figure, reference, basis = last[node]
        verdict: Verdict = ("fail" if figure == 0 else "slow") if node == halving.bad else "ok"
        verdicts.append(NodeVerdict(node, verdict, figure, reference, basis))
    return verdicts


def sub_inventory(inventory: Inventory, group: Sequence[str]) -> Inventory:
    """The inventory of ``group``'s nodes only, the first one the primary (it runs mpirun)."""
    nodes = [
        inventory.node(name).model_copy(update={"role": "primary" if i == 0 else "secondary"})
        for i, name in enumerate(group)
    ]
    return inventory.model_copy(update={"nodes": nodes})


def collective_workload(inventory: Inventory, *, all_sizes: bool = False) -> Workload:
    """nccl-tests on GPU nodes, else the CPU allreduce at ``CPU_MAX_BYTES`` only (``all_sizes``: every size
    from 1 to 64 MiB)."""
    if inventory.primary.gpus.count > 0:
        return get_workload("nccl-tests")
    if all_sizes:
        return Allreduce()
    return Allreduce(min_bytes=CPU_MAX_BYTES, max_bytes=CPU_MAX_BYTES)


def group_plan(inventory: Inventory, workload: Workload, ranks_per_node: int | None = None) -> Job:
    """The collective's job on a group's inventory (``sub_inventory``), its first node starting
    mpirun. Pure.

    Raises:
        InputError: the image cannot run ``workload``, or more ranks than a node's GPUs.
    """
    options = run_options(inventory, workload.name, nodes=len(inventory.nodes), ranks_per_node=ranks_per_node)
    return build_job(inventory, options, workload)


def conductor_measure(
    inventory: Inventory,
    *,
    repeats: int,
    timeout_s: float,
    runs_dir: Path,
    on_group: Callable[[Group], None] | None = None,
    ranks_per_node: int | None = None,
    all_sizes: bool = False,
    launcher: str | None = "ssh",
) -> Measure:
    """A ``Measure`` that runs the collective on a group through the conductor, each run bounded by
    ``timeout_s`` and recorded under ``runs_dir``. ``launcher``: ``ssh`` (mpirun in the first node's
    container, no topology snapshot: `check topology` takes it), ``slurm`` (one job per run on exactly
    the group's nodes, ``--nodelist``) or None (the inventory's default launcher). ``ranks_per_node``
    (None: the node's GPUs, or its ranks) and ``all_sizes`` (the CPU allreduce up to 64 MiB, not 4 MiB)
    serve `check health`'s single-node collective.

    Raises:
        InputError: an unknown launcher, or slurm for an inventory without a slurm block.

    Raises (when called):
        InputError: the image cannot run the collective.
        StepError, ConnectError: a node's container or engine cannot be reached.
    """
    # Imported on use: the conductor and the launchers pull SSH and the docker SDK.
    from clusterctl.run.backends.ssh import SshBackend
    from clusterctl.run.conductor import run_plans
    from clusterctl.run.context import get_backend

    workload = collective_workload(inventory, all_sizes=all_sizes)
    backend = get_backend(inventory, launcher)
    if isinstance(backend, SshBackend):
        backend = SshBackend(take_snapshot=lambda inv, nodes: {})

    def measure(group: Sequence[str]) -> Group:
        sub = backend.on_exactly(sub_inventory(inventory, group))
        plan = group_plan(sub, workload, ranks_per_node)
        context = RunContext(sub, (plan,), workload, backend, runs_dir, timeout_s, repeats=repeats)
        done = run_plans(context)
        result = Group(
            tuple(group),
            tuple(_busbw(record) for record, _ in done),
            tuple(f for record, _ in done if (f := _failure(record))),
            tuple(str(directory) for _, directory in done),
        )
        if on_group is not None:
            on_group(result)
        return result

    return measure


def _busbw(record: RunRecord) -> float:
    """The run's bus bandwidth at the largest size (GB/s); 0 for a run that failed or printed none."""
    metric = record.metrics.get(LARGE_BUSBW)
    return metric.value if record.valid and metric is not None else 0.0


def _failure(record: RunRecord) -> str | None:
    """Why the run gives no figure (its errors, or its exit code); None when it gave one."""
    if _busbw(record) > 0:
        return None
    errors = "; ".join(f.message for f in record.findings if f.severity == "error")
    return f"{record.run_id}: {errors or f'exit code {record.exit_code}'}"


def default_baseline(inventory: Inventory) -> Baseline | None:
    """``pairs_baseline`` from the site's baselines and the shipped ones."""
    return pairs_baseline(inventory, baselines_for(inventory))
