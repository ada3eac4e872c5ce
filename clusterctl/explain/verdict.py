"""The verdict: what the rules' answers add up to, in one line. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from clusterctl.explain.model import Diagnosis, RunFacts
from clusterctl.explain.rules import ACROSS_RUNS, COMPUTE_SCALING_CODE

BALANCED = "balanced"
UNKNOWN = "unknown"


class Verdict(BaseModel):
    """The run's headline: a code (the first bottleneck found, ``balanced`` or ``unknown``) and a line."""

    code: str = Field(description="The first found rule's code; balanced: none found; unknown: no breakdown.")
    line: str = Field(description="The code and what the first two found rules say.")


def verdict(facts: RunFacts, diagnoses: Sequence[Diagnosis]) -> Verdict:
    """The first two found diagnoses about the run's step (rules are ordered cause before symptom; a
    rule across the configuration's runs, ``ACROSS_RUNS``, is never the verdict) as one line."""
    if not facts.breakdown:
        return Verdict(
            code=UNKNOWN,
            line=f"{UNKNOWN}: the run recorded no per-step breakdown (an older clusterctl, a workload "
            "that prints none, or every rank crashed): nothing to explain it by",
        )
    step = [d for d in diagnoses if d.code not in ACROSS_RUNS]  # the run's step, not its peers
    found = _main_loss_first(facts, [d for d in step if d.status == "found"])
    if not found:
        known = sum(d.status != "unknown" for d in step)
        return Verdict(code=BALANCED, line=f"{BALANCED}: {_efficiencies(facts)}no rule found a bottleneck "
                       f"({known} of {len(step)} could decide)")  # fmt: skip
    return Verdict(
        code=found[0].code, line=f"{found[0].code}: " + "; ".join(_gist(d.message) for d in found[:2])
    )


def _main_loss_first(facts: RunFacts, found: list[Diagnosis]) -> list[Diagnosis]:
    """``found`` in rule order, but with compute-scaling after the others when it is not the main loss:
    the run's parallel efficiency (what the rules inside the run explain) is below its computation
    scalability."""
    scaling = facts.scaling
    pe = facts.record.pop.parallel_efficiency if facts.record.pop else None
    if scaling is not None and pe is not None and scaling.computation_scalability > pe:
        return sorted(found, key=lambda d: d.code == COMPUTE_SCALING_CODE)
    return found


def _efficiencies(facts: RunFacts) -> str:
    """The POP efficiencies known for the run, for the balanced line: parallel, computation, global."""
    pe = facts.record.pop.parallel_efficiency if facts.record.pop else None
    scaling = facts.scaling
    words = [f"parallel efficiency {pe:.2f}"] if pe is not None else []
    if scaling is not None:
        words.append(f"computation scalability {scaling.computation_scalability:.2f}")
        if scaling.global_efficiency is not None:
            words.append(f"global efficiency {scaling.global_efficiency:.2f}")
    return "".join(f"{w}; " for w in words)


def _gist(message: str) -> str:
    """A message's first clause, without its figures in parentheses: what the verdict line quotes."""
    return message.split(";")[0].split(" (")[0]
