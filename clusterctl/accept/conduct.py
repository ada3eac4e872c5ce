"""The effectful half of `clusterctl accept`: the plan's steps run in order through the same package
functions the single commands call (``check_health``, ``check_topology``, ``check_pairs``, the
conductor's ``run_plans``, ``explained_report``, ``explain``), each step's outcome judged by
``clusterctl.accept.verdict``.

A node a check fails is left out of the later steps (``exclude``) or ends the acceptance (``stop``);
a collective or a 1-node run that gives no figure ends it too: the runs after it would measure nothing.
Everything is written under one directory: ``health/``, ``topology/`` (bundles) and ``runs/`` (the run
directories and their history).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.accept.criteria import Criteria
from clusterctl.accept.plan import AcceptPlan, nodes_after
from clusterctl.accept.verdict import (
    AcceptResult,
    CriterionResult,
    NodeCheck,
    StepOutcome,
    busbw_threshold,
    judge_balance,
    judge_collective,
    judge_pairs,
    judge_scaling,
    judge_severity,
    with_explained,
)
from clusterctl.check.health_collective import reference, run_collectives
from clusterctl.check.pairs import check_pairs, conductor_measure, default_baseline, sub_inventory
from clusterctl.diagnostics.active import TIERS
from clusterctl.diagnostics.check import check_topology
from clusterctl.diagnostics.health import check_health
from clusterctl.errors import ClusterctlError, InputError
from clusterctl.explain.explanation import explain
from clusterctl.explain.gather import explained_report, gather
from clusterctl.findings import Finding, worst
from clusterctl.inventory import Inventory
from clusterctl.results.baselines import baselines_for
from clusterctl.results.record import RunRecord
from clusterctl.results.report import ReportRow
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.plan import plan_run
from clusterctl.run.preflight import preflight_minimum, preflight_plans
from clusterctl.workloads.job import Job
from clusterctl.workloads.nccl_tests import LARGE_BUSBW

Say = Callable[[str], None]
# explain's rule that compares the nodes' useful compute within one run.
STRAGGLER_CODE = "straggler"


class _Stop(Exception):
    """The acceptance ends here; the reason is already in the result."""


@dataclass
class _State:
    """The nodes still in, the result so far, and where things are written."""

    inventory: Inventory
    plan: AcceptPlan
    criteria: Criteria
    out: Path
    say: Say
    result: AcceptResult = field(default_factory=AcceptResult)
    records: dict[int, list[RunRecord]] = field(default_factory=dict)
    passive_health: list[NodeCheck] = field(default_factory=list)

    @property
    def runs_dir(self) -> Path:
        return self.out / "runs"

    def leave_out(self, check: str, bad: Sequence[str]) -> None:
        """Leave ``bad`` nodes out (exclude) or stop; stop too when no node would be left.

        Raises:
            _Stop: ``stop`` chosen, a cluster-wide failure, or no node left.
        """
        if not bad:
            return
        kept = nodes_after(
            check, [n.name for n in self.inventory.nodes], list(bad), self.plan.options.on_bad_node
        )
        if isinstance(kept, str):
            self.result.stopped = kept
            raise _Stop
        self.result.excluded += [n for n in bad if n not in self.result.excluded]
        self.say(f"{check}: leaving out {', '.join(bad)}; going on with {', '.join(kept)}")
        self.inventory = sub_inventory(self.inventory, kept)


def run_acceptance(
    inventory: Inventory, plan: AcceptPlan, criteria: Criteria, out: Path, say: Say
) -> AcceptResult:
    """Run ``plan``'s steps on ``inventory`` against ``criteria``, writing under ``out``; ``say`` hears
    one line as each step starts and ends.

    A step that raises a failure (an unreachable node, a run that failed: exit 1 errors) stops the
    acceptance with that reason, so the verdict still lists every criterion.

    Raises:
        InputError: as the steps' functions (an image that cannot run the workload, ...).
    """
    state = _State(inventory, plan, criteria, out, say)
    state.result.runs_dir = str(state.runs_dir)
    steps: list[tuple[str, Callable[[_State], None]]] = [
        ("health", _health),
        (f"health-{plan.options.level}", _active_health),
        ("topology", _topology),
        ("pairs", _pairs),
        ("collective", _collective),
        ("run-1", _run_one),
        ("run-all", _run_all),
        ("report", _report),
        ("explain", _explain),
    ]
    planned = {s.key for s in plan.steps}
    for key, do in steps:
        real = key if key != "run-all" else f"run-{len(plan.nodes)}"
        if real not in planned:
            continue
        if state.result.stopped:
            state.result.steps.append(StepOutcome(real, "skipped", 0.0, "not reached"))
            continue
        say(f"{real}: starting")
        started = time.monotonic()
        try:
            do(state)
        except _Stop:
            pass
        except ClusterctlError as exc:  # a node or run that failed is a result; bad input (exit 2) is not
            if isinstance(exc, InputError):
                raise
            state.result.stopped = f"{real} failed: {exc}"
        finally:
            seconds = time.monotonic() - started
            state.result.steps.append(StepOutcome(real, "done", seconds, state.result.stopped or ""))
        say(f"{real}: done in {seconds:.0f} s")
    return state.result


def _severity_checks(
    per_node: dict[str, list[Finding]], unknown: set[str], summaries: dict[str, str]
) -> list[NodeCheck]:
    return [
        NodeCheck(node, worst(found) or "none", node in unknown, summaries.get(node) or _summary(found))
        for node, found in per_node.items()
    ]


def _summary(found: list[Finding]) -> str:
    """The worst finding's code and message, or ``no findings``."""
    head = next((f for f in found if f.severity == worst(found)), None)
    return f"{head.code}: {head.message}" if head else "no findings"


def _judge_nodes(state: _State, check: str, nodes: list[NodeCheck]) -> None:
    """Judge a severity check (health or topology), add its criterion (replacing an earlier one of the
    same check), and leave out the nodes it fails."""
    criterion = judge_severity(check, nodes, getattr(state.criteria, check).max_severity)
    state.result.criteria = [c for c in state.result.criteria if c.name != check] + [criterion]
    state.leave_out(check, list(criterion.nodes))


def _health(state: _State) -> None:
    report = check_health(state.inventory, state.out / "health" / "quick",
                          timeout_s=state.plan.options.collect_timeout_s, level="quick")  # fmt: skip
    nodes = _severity_checks(
        {name: h.findings for name, h in report.nodes.items()},
        {name for name, h in report.nodes.items() if h.verdict == "unknown"},
        {name: h.summary() for name, h in report.nodes.items()},
    )
    state.passive_health = nodes
    _judge_nodes(state, "health", nodes)


def _active_health(state: _State) -> None:
    level = state.plan.options.level
    runs = state.out / "health" / level
    report = check_health(state.inventory, runs,
                          timeout_s=state.plan.options.collect_timeout_s + TIERS[level].script_s(), level=level)  # fmt: skip
    report.add_collectives(
        run_collectives(state.inventory, level, state.runs_dir), *reference(state.inventory)
    )
    active = _severity_checks(
        {name: h.findings for name, h in report.nodes.items()},
        {name for name, h in report.nodes.items() if h.verdict == "unknown"},
        {name: h.summary() for name, h in report.nodes.items()},
    )
    earlier = [n for n in state.passive_health if n.node not in report.nodes]
    _judge_nodes(state, "health", earlier + active)


def _topology(state: _State) -> None:
    report = check_topology(
        state.inventory, state.out / "topology", timeout_s=state.plan.options.collect_timeout_s
    )
    per_node = {name: r.findings for name, r in report.nodes.items()}
    if report.cluster:
        per_node["(cluster)"] = report.cluster
    _judge_nodes(state, "topology", _severity_checks(per_node, set(), {}))


def _pairs(state: _State) -> None:
    if len(state.inventory.nodes) < 2:
        state.result.criteria.append(CriterionResult("pairs", "skipped", "-", "one node left"))
        return
    o = state.plan.options

    def progress(group: object) -> None:
        state.say(f"pairs: {'+'.join(group.nodes)} busbw {', '.join(f'{s:.3g}' for s in group.samples)} GB/s")  # type: ignore[attr-defined]

    measure = conductor_measure(
        state.inventory,
        repeats=o.pairs_repeats,
        timeout_s=o.run_timeout_s,
        runs_dir=state.runs_dir,
        on_group=progress,
    )
    report = check_pairs(
        state.inventory, measure, search="auto", repeats=o.pairs_repeats,
        tolerance=state.criteria.pairs.tolerance, baseline=default_baseline(state.inventory),
    )  # fmt: skip
    criterion = judge_pairs(
        [(v.node, v.verdict, v.summary()) for v in report.nodes],
        [s.summary() for s in report.links],
        state.criteria.pairs.tolerance,
    )
    state.result.criteria.append(criterion)
    state.leave_out("pairs", list(criterion.nodes))


def _model_plan(state: _State, nodes: int) -> Job:
    o = state.plan.options
    settings = {"steps": o.steps, "warmup_steps": o.warmup_steps, "image_size": o.image_size,
                "batch_size": o.batch_size}  # fmt: skip
    return plan_run(
        state.inventory, o.workload, nodes=nodes, **{k: v for k, v in settings.items() if v is not None}
    )


def _collective(state: _State) -> None:
    inventory, n = state.inventory, len(state.inventory.nodes)
    if n < 2:
        state.result.criteria.append(CriterionResult("collective", "skipped", "-", "one node left"))
        return
    checks = preflight_plans(inventory, _model_plan(state, n))
    context = run_context(
        inventory, list(checks), runs_dir=state.runs_dir, timeout_s=state.plan.options.run_timeout_s
    )
    records = [record for record, _ in run_plans(context)]
    figures = [r.metrics[LARGE_BUSBW].value for r in records if r.valid and LARGE_BUSBW in r.metrics]
    failure = None if len(figures) == len(records) else "; ".join(_failure(r) for r in records if not r.valid)
    threshold = collective_threshold(inventory, state.criteria, n)
    criterion = judge_collective(
        min(figures) if figures and not failure else None, failure, rails(inventory), threshold
    )
    state.result.criteria.append(criterion)
    if failure:
        state.result.stopped = (
            f"the collective on {n} nodes failed ({failure}): the runs would measure nothing"
        )
        raise _Stop


def rails(inventory: Inventory) -> int:
    """The rails of a node: its HCA ports (the inventory keeps the nodes alike), 1 without a list."""
    return len(inventory.primary.fabric.hca or ()) or 1


def collective_threshold(inventory: Inventory, criteria: Criteria, nodes: int) -> tuple[float | None, str]:
    """The least bus bandwidth per rail of the collective on ``nodes`` nodes and where it comes from
    (``busbw_threshold`` over `run --preflight`'s minimum: the inventory's, else the floor of this
    hardware's baseline, the site's first)."""
    minimum, source = preflight_minimum(inventory, nodes, baselines_for(inventory))
    return busbw_threshold(
        criteria.collective.min_busbw_per_rail_gb_s,
        (source, minimum) if minimum is not None else None,
        rails(inventory),
    )


def _failure(record: RunRecord) -> str:
    errors = "; ".join(f.message for f in record.findings if f.severity == "error")
    return f"{record.run_id}: {errors or f'exit code {record.exit_code}'}"


def _runs(state: _State, nodes: int) -> None:
    context = run_context(
        state.inventory,
        [_model_plan(state, nodes)],
        runs_dir=state.runs_dir,
        timeout_s=state.plan.options.run_timeout_s,
        repeats=state.plan.options.repeats,
        on_record=lambda record, _: state.say(
            f"run {record.run_id}: {'valid' if record.valid else 'INVALID'}, {record.value or 0:,.2f} {record.primary_metric}"
        ),
    )
    records = [record for record, _ in run_plans(context)]
    state.records[nodes] = records
    if not any(r.valid for r in records):
        state.result.stopped = (
            f"every {state.plan.options.workload} run on {nodes} node(s) failed ({_failure(records[-1])})"
        )
        raise _Stop


def _run_one(state: _State) -> None:
    _runs(state, 1)


def _run_all(state: _State) -> None:
    n = len(state.inventory.nodes)
    if n < 2:
        state.result.criteria.append(CriterionResult("scaling", "skipped", "-", "one node left"))
        return
    _runs(state, n)


def _rows(state: _State) -> tuple[ReportRow | None, ReportRow | None]:
    """The report rows of the 1-node and the all-node runs."""
    rows, _ = explained_report(state.runs_dir)
    # Found by workload and node count: accept's runs directory holds only its own runs.
    workload = state.plan.options.workload
    by_nodes = {tuple(r.nodes): r for r in rows if r.config.workload == workload}
    n = max(state.records)
    return by_nodes.get((1,)), by_nodes.get((n,)) if n > 1 else None


def _report(state: _State) -> None:
    one, many = _rows(state)
    if many is None:
        return
    efficiency = None
    if one is not None and one.median and many.median:
        efficiency = many.median / one.median / (many.devices / one.devices)
    point = next((c for c in many.comparisons if c.metric == "efficiency"), None)
    state.result.criteria.append(
        judge_scaling(
            efficiency,
            many.devices,
            many.invalid_runs,
            state.criteria.scaling.min_efficiency,
            (point.reference, point.lower_bound) if point else None,
        )
    )


def _explain(state: _State) -> None:
    n = max(state.records)
    record = next((r for r in reversed(state.records[n]) if r.valid), state.records[n][-1])
    facts, _ = gather(state.runs_dir, record.run_id)
    explanation = explain(facts)
    state.result.explanation = explanation.verdict.line
    found = [d for d in explanation.diagnoses if d.status == "found" and d.node]
    named = {d.node: f"{d.code}: {d.message}" for d in found if d.node}
    state.result.criteria = [
        with_explained(c, named) if c.name == "scaling" else c for c in state.result.criteria
    ]
    if n < 2:
        return
    straggler = next((d for d in explanation.diagnoses if d.code == STRAGGLER_CODE), None)
    ratio = straggler.evidence.get("ratio") if straggler else None
    state.result.criteria.append(
        judge_balance(
            float(ratio) if isinstance(ratio, int | float) else None,
            straggler.node if straggler else None,
            straggler.message if straggler else "explain has no straggler rule",
            state.criteria.balance.max_compute_ratio,
        )
    )
