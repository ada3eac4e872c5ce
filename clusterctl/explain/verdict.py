"""The verdict: what the rules' answers add up to, in one line. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from clusterctl.explain.model import Diagnosis, RunFacts

BALANCED = "balanced"
UNKNOWN = "unknown"


class Verdict(BaseModel):
    """The run's headline: a code (the first bottleneck found, ``balanced`` or ``unknown``) and a line."""

    code: str = Field(description="The first found rule's code; balanced: none found; unknown: no breakdown.")
    line: str = Field(description="The code and what the first two found rules say.")


def verdict(facts: RunFacts, diagnoses: Sequence[Diagnosis]) -> Verdict:
    """The first two found diagnoses (rules are ordered cause before symptom) as one line."""
    if not facts.breakdown:
        return Verdict(
            code=UNKNOWN,
            line=f"{UNKNOWN}: the run recorded no per-step breakdown (an older clusterctl, a workload "
            "that prints none, or every rank crashed): nothing to explain it by",
        )
    found = [d for d in diagnoses if d.status == "found"]
    if not found:
        pe = facts.record.pop.parallel_efficiency if facts.record.pop else None
        known = sum(d.status != "unknown" for d in diagnoses)
        efficiency = f"parallel efficiency {pe:.2f}; " if pe is not None else ""
        return Verdict(code=BALANCED, line=f"{BALANCED}: {efficiency}no rule found a bottleneck "
                       f"({known} of {len(diagnoses)} could decide)")  # fmt: skip
    return Verdict(
        code=found[0].code, line=f"{found[0].code}: " + "; ".join(_gist(d.message) for d in found[:2])
    )


def _gist(message: str) -> str:
    """A message's first clause, without its figures in parentheses: what the verdict line quotes."""
    return message.split(";")[0].split(" (")[0]
