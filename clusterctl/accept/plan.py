"""What `clusterctl accept` runs, in order, and how long each step may take (pure).

The steps: the passive health checks, the chosen health level's active checks, the topology check,
the node pairs, the collective on every node, the workload on 1 node then on every node, the report
and the explanation. Each step that contacts a host has a bound in seconds, made of the same bounds
the single commands use (`check health --timeout`, `check pairs --timeout` x groups x repeats, `run
--timeout` x repeats); the report and explain steps read run directories on this machine only, every
file under its size cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clusterctl.diagnostics.active import LEVELS, TIERS, Level
from clusterctl.diagnostics.pairs import all_pairs, halving_groups

OnBadNode = Literal["exclude", "stop"]
# `check topology`'s and `check health`'s own default per-node collection bound.
COLLECT_TIMEOUT_S = 180.0
# `check pairs`' search: every pair up to this many nodes (its "auto"), halving above.
ALL_PAIRS_UP_TO = 8


@dataclass(frozen=True)
class AcceptOptions:
    """The run settings of one acceptance: the health level, what to do with a node that fails, the
    workload and its small settings (None: the inventory's), repeats and each run's bound."""

    level: Level = "quick"
    on_bad_node: OnBadNode = "exclude"
    workload: str = "resnet50"
    repeats: int = 1
    pairs_repeats: int = 1
    run_timeout_s: float = 600.0
    collect_timeout_s: float = COLLECT_TIMEOUT_S
    steps: int | None = None
    warmup_steps: int | None = None
    image_size: int | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class Step:
    """One step: its key (stable, in --json), what it runs, its bound in seconds (None: local reads)."""

    key: str
    what: str
    bound_s: float | None


@dataclass(frozen=True)
class AcceptPlan:
    """The steps in order, on these nodes, with these options."""

    nodes: tuple[str, ...]
    options: AcceptOptions
    steps: tuple[Step, ...]

    @property
    def bound_s(self) -> float:
        """The most the whole acceptance takes on the hosts."""
        return sum(s.bound_s or 0 for s in self.steps)

    def to_json(self) -> dict[str, object]:
        """The plan as --plan --json prints it."""
        return {
            "nodes": list(self.nodes),
            "bound_s": self.bound_s,
            "steps": [{"key": s.key, "what": s.what, "bound_s": s.bound_s} for s in self.steps],
        }


def pair_groups(nodes: int) -> int:
    """The most groups `check pairs`' auto search measures on ``nodes`` nodes: every pair up to
    ``ALL_PAIRS_UP_TO``, else the halving search's (``halving_groups``)."""
    if nodes <= ALL_PAIRS_UP_TO:
        return len(all_pairs([str(i) for i in range(nodes)]))
    return halving_groups(nodes)


def plan_accept(nodes: list[str], options: AcceptOptions) -> AcceptPlan:
    """The steps for ``nodes`` (the inventory's, in order) with ``options``.

    Raises:
        ValueError: no nodes, or a level that is not one of ``LEVELS``.
    """
    if not nodes:
        raise ValueError("an acceptance needs at least one node")
    if options.level not in LEVELS:
        raise ValueError(f"level {options.level!r} is not one of {LEVELS}")
    n, o = len(nodes), options
    runs = f"{o.repeats} run(s)"
    steps = [Step("health", "check health --level quick: the passive checks, every node at once",
                  o.collect_timeout_s)]  # fmt: skip
    if o.level != "quick":
        tier = TIERS[o.level]
        steps.append(Step(
            f"health-{o.level}",
            f"check health --level {o.level}: nvbandwidth and dcgmi diag on every node, then a 1-node "
            f"collective on each ({tier.collective_runs} run(s) x {tier.collective_s} s)",
            o.collect_timeout_s + tier.script_s() + tier.collective_bound_s(n),
        ))  # fmt: skip
    steps.append(Step("topology", "check topology: GPUs, HCAs, addresses, versions", o.collect_timeout_s))
    if n >= 2:
        groups = pair_groups(n)
        steps.append(Step(
            "pairs",
            f"check pairs: the collective on {groups} group(s), {o.pairs_repeats} run(s) each",
            groups * o.pairs_repeats * o.run_timeout_s,
        ))  # fmt: skip
        steps.append(Step("collective", f"the preflight collective on {n} nodes, 1 run", o.run_timeout_s))
    steps.append(Step("run-1", f"run {o.workload} on 1 node, {runs}", o.repeats * o.run_timeout_s))
    if n >= 2:
        steps.append(Step(f"run-{n}", f"run {o.workload} on {n} nodes, {runs}", o.repeats * o.run_timeout_s))
    steps.append(Step("report", "report: speedup and efficiency of the runs (local)", None))
    steps.append(Step("explain", "explain: the all-node run's verdict (local)", None))
    return AcceptPlan(tuple(nodes), options, tuple(steps))


def nodes_after(check: str, nodes: list[str], bad: list[str], on_bad_node: OnBadNode) -> list[str] | str:
    """The nodes the later steps run on once ``check`` failed ``bad`` of ``nodes``, or why the
    acceptance stops: ``stop`` chosen, a failure of no one node (``(cluster)``), or no node left."""
    kept = [n for n in nodes if n not in bad]
    if bad and (on_bad_node == "stop" or not kept or any(b not in nodes for b in bad)):
        return f"{check} failed on {', '.join(bad)}"
    return kept
