"""Each acceptance criterion judged from what its step measured, and the overall verdict (pure).

A criterion passes, fails, is shown without a threshold (``no-threshold``: nothing shipped for this
hardware and none written), or was not reached (``skipped``: an earlier step stopped the acceptance).
The acceptance passes when no criterion failed and nothing stopped it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from clusterctl.accept.criteria import Severity

Status = Literal["pass", "fail", "no-threshold", "skipped"]
SCHEMA = "clusterctl.accept/1"
# The order criteria are listed in: the order of the steps that measure them.
CRITERIA = ("health", "topology", "pairs", "collective", "scaling", "balance")
_RANK = {"none": 0, "info": 1, "warning": 2, "error": 3}


@dataclass(frozen=True)
class CriterionResult:
    """One criterion: its status, the threshold in words, the evidence, and the nodes it names."""

    name: str
    status: Status
    threshold: str
    evidence: str
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeCheck:
    """One node's outcome in a check with findings: its worst severity (``none``: no finding), whether
    its checks could not look, and its one-line summary."""

    node: str
    worst: Literal["none", "info", "warning", "error"]
    unknown: bool
    summary: str


@dataclass(frozen=True)
class StepOutcome:
    """A step as it went: done, skipped (not reached, or not needed), with its seconds and a line."""

    key: str
    status: Literal["done", "skipped"]
    seconds: float
    detail: str = ""


@dataclass
class AcceptResult:
    """The criteria, in order, the steps, the nodes left out, why it stopped early (None: it did not)."""

    criteria: list[CriterionResult] = field(default_factory=list)
    steps: list[StepOutcome] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    stopped: str | None = None
    explanation: str | None = None
    runs_dir: str = ""

    @property
    def verdict(self) -> Literal["pass", "fail"]:
        """fail when a criterion failed or the acceptance stopped early."""
        failed = any(c.status == "fail" for c in self.criteria)
        return "fail" if failed or self.stopped else "pass"

    @property
    def named(self) -> list[str]:
        """Every node a failed criterion names, once, in order."""
        return list(dict.fromkeys(n for c in self.criteria if c.status == "fail" for n in c.nodes))

    def completed(self) -> list[CriterionResult]:
        """``criteria`` with every criterion not reached listed as skipped, in ``CRITERIA`` order."""
        have = {c.name: c for c in self.criteria}
        why = f"not reached: {self.stopped}" if self.stopped else "not run (one node)"
        return [have.get(name) or CriterionResult(name, "skipped", "-", why) for name in CRITERIA]

    def to_json(self) -> dict[str, object]:
        """The documented JSON form (schema ``clusterctl.accept/1``)."""
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "named": self.named,
            "excluded": self.excluded,
            "stopped": self.stopped,
            "criteria": [
                {
                    "name": c.name,
                    "status": c.status,
                    "threshold": c.threshold,
                    "evidence": c.evidence,
                    "nodes": list(c.nodes),
                }
                for c in self.completed()
            ],
            "steps": [
                {"key": s.key, "status": s.status, "seconds": round(s.seconds, 1), "detail": s.detail}
                for s in self.steps
            ],
            "explanation": self.explanation,
            "runs_dir": self.runs_dir,
        }


def criteria_lines(
    health: Severity,
    topology: Severity,
    tolerance: float,
    busbw: tuple[float | None, str],
    efficiency: float | None,
    ratio: float,
) -> list[str]:
    """The thresholds in words, one line per criterion, as `accept --plan` shows them (``busbw``: as
    ``busbw_threshold`` gives it; ``efficiency`` None: a reference's, found after the runs)."""
    minimum, source = busbw
    return [
        f"health      worst finding at most {health}",
        f"topology    worst finding at most {topology}",
        f"pairs       each node within {tolerance:.0%} of its reference",
        "collective  "
        + (f">= {minimum:.3g} GB/s per rail ({source})" if minimum is not None else f"shown ({source})"),
        "scaling     "
        + (
            f">= {_percent(efficiency)} efficiency"
            if efficiency is not None
            else "a published reference's, where one matches"
        ),
        f"balance     slowest node's compute at most {ratio:g}x the fastest's",
    ]


def judge_severity(name: str, nodes: Sequence[NodeCheck], max_severity: Severity) -> CriterionResult:
    """A check with findings: a node fails above ``max_severity`` or when its checks could not look."""
    bad = [n for n in nodes if n.unknown or _RANK[n.worst] > _RANK[max_severity]]
    threshold = f"worst finding at most {max_severity}"
    if not bad:
        return CriterionResult(name, "pass", threshold, f"{len(nodes)} node(s) within it")
    evidence = "; ".join(f"{n.node}: {n.summary}" for n in bad)
    return CriterionResult(name, "fail", threshold, evidence, tuple(n.node for n in bad))


def judge_pairs(
    verdicts: Sequence[tuple[str, str, str]], links: Sequence[str], tolerance: float
) -> CriterionResult:
    """`check pairs`' node verdicts ((node, verdict, summary): ok, slow or fail) and slow links."""
    threshold = f"each node within {tolerance:.0%} of its reference"
    bad = [(node, verdict, summary) for node, verdict, summary in verdicts if verdict != "ok"]
    if not bad and not links:
        figures = "; ".join(f"{node}: {summary}" for node, _, summary in verdicts)
        return CriterionResult("pairs", "pass", threshold, figures)
    evidence = "; ".join([f"{node} {verdict.upper()}: {summary}" for node, verdict, summary in bad]
                         + [f"slow link {link}" for link in links])  # fmt: skip
    return CriterionResult("pairs", "fail", threshold, evidence, tuple(node for node, _, _ in bad))


def busbw_threshold(
    per_rail_gb_s: float | None, minimum: tuple[str, float] | None, rails: int
) -> tuple[float | None, str]:
    """The least bus bandwidth per rail and where it comes from: the criteria file's, else ``minimum``
    ((where from, GB/s): the preflight's minimum, an inventory's or a baseline's floor) over ``rails``,
    else none."""
    if per_rail_gb_s is not None:
        return per_rail_gb_s, "criteria file"
    if minimum is not None:
        source, gb_s = minimum
        return gb_s / rails, f"{source} / {rails} rail(s)"
    return None, "no baseline for this hardware"


def judge_collective(
    busbw_gb_s: float | None, failure: str | None, rails: int, threshold: tuple[float | None, str]
) -> CriterionResult:
    """The all-node collective: its bus bandwidth per rail against ``threshold`` (``busbw_threshold``)."""
    minimum, source = threshold
    words = f">= {minimum:.3g} GB/s per rail ({source})" if minimum is not None else f"none ({source})"
    if failure is not None or busbw_gb_s is None:
        return CriterionResult("collective", "fail", words, f"no bus bandwidth: {failure or 'none printed'}")
    per_rail = busbw_gb_s / rails
    evidence = f"busbw {busbw_gb_s:.3g} GB/s over {rails} rail(s): {per_rail:.3g} GB/s per rail"
    if minimum is None:
        return CriterionResult("collective", "no-threshold", words, evidence)
    return CriterionResult("collective", "pass" if per_rail >= minimum else "fail", words, evidence)


def _percent(fraction: float) -> str:
    """``fraction`` in percent, with decimals below 1% (0.001 is 0.10%, never 0%)."""
    return f"{fraction:.0%}" if fraction >= 0.01 else f"{fraction:.2%}"


def judge_scaling(
    efficiency: float | None,
    devices: int,
    invalid_runs: int,
    minimum: float | None,
    reference: tuple[str, float] | None,
) -> CriterionResult:
    """The all-node run's efficiency (its throughput over the node count times the 1-node run's)
    against ``minimum`` (the criteria file's), else ``reference`` ((name, lower bound) of a published
    point), else none. ``invalid_runs`` fail it."""
    if minimum is not None:
        threshold, words = minimum, f">= {_percent(minimum)} (criteria file)"
    elif reference is not None:
        threshold, words = reference[1], f">= {_percent(reference[1])} (reference {reference[0]})"
    else:
        threshold, words = None, "none (no reference for this configuration)"
    if efficiency is None or invalid_runs:
        why = f"{invalid_runs} invalid run(s)" if invalid_runs else "no efficiency (a run gave no figure)"
        return CriterionResult("scaling", "fail", words, why)
    evidence = f"efficiency {_percent(efficiency)} on {devices} devices"
    if threshold is None:
        return CriterionResult("scaling", "no-threshold", words, evidence)
    return CriterionResult("scaling", "pass" if efficiency >= threshold else "fail", words, evidence)


def judge_balance(ratio: float | None, node: str | None, message: str, maximum: float) -> CriterionResult:
    """The all-node run's slowest node's useful compute over the fastest's (explain's straggler rule:
    ``ratio``, the slowest ``node``, its ``message``) against ``maximum``; no ratio: not judged."""
    threshold = f"slowest node's compute at most {maximum:g}x the fastest's"
    if ratio is None:
        return CriterionResult("balance", "no-threshold", threshold, f"not measured: {message}")
    if ratio <= maximum:
        return CriterionResult("balance", "pass", threshold, message)
    return CriterionResult("balance", "fail", threshold, message, (node,) if node else ())


def with_explained(criterion: CriterionResult, found: Mapping[str, str]) -> CriterionResult:
    """``criterion`` with what explain found on each node (node -> code: message) in its evidence; a
    failed criterion names those nodes (the straggler a throttled node shows as)."""
    if not found:
        return criterion
    evidence = (
        criterion.evidence + "; explain: " + "; ".join(f"{node}: {what}" for node, what in found.items())
    )
    nodes = tuple(found) if criterion.status == "fail" else criterion.nodes
    return replace(criterion, evidence=evidence, nodes=nodes)
