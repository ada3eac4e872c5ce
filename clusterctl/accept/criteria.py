"""Acceptance criteria: the thresholds `clusterctl accept` judges a cluster by (pure).

A criteria file is a small YAML mapping; every key is optional and an unknown key is an error::

    health: {max_severity: warning}      # the worst finding a node may show and still pass
    topology: {max_severity: warning}
    pairs: {tolerance: 0.5}              # a node below (1 - tolerance) x its reference is named
    collective: {min_busbw_per_rail_gb_s: 20}
    scaling: {min_efficiency: 0.8}
    balance: {max_compute_ratio: 1.5}    # the slowest node's compute over the fastest's

An unset busbw threshold is the floor of the baseline shipped (or saved by `clusterctl baseline save`)
for this hardware and node count (``results/baselines.yml``: keyed by gpu, gpus_per_node, nodes,
fabric, hca_rate_gbps), divided by the node's rails; an unset efficiency threshold is the lower bound of
a published reference point for the run's configuration (``results/references.yml``: keyed by model,
precision, batch size and device, per device count). Without either the figure is shown, not judged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusterctl.errors import InputError
from clusterctl.inventory.location import format_loc
from clusterctl.yamlio import line_of, load_yaml

# The worst finding severity a node may show and still pass: "info" fails on any warning.
Severity = Literal["info", "warning"]
# check pairs' own default: a node under half its reference is named.
DEFAULT_PAIRS_TOLERANCE = 0.5
# explain calls a node a straggler from 1.25 (same-node noise on a shared host measured 1.17); an
# acceptance fails a node from 1.5, so a busy but sound host passes and a throttled one does not.
DEFAULT_COMPUTE_RATIO = 1.5


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SeverityCriterion(_Strict):
    """A check whose nodes pass while their worst finding is at most ``max_severity``."""

    max_severity: Severity = Field(
        "warning",
        description="The worst finding a node may show and pass: warning (errors fail) or info (warnings "
        "fail too). A node whose checks could not look (health: unknown) fails either way.",
    )


class PairsCriterion(_Strict):
    """`check pairs`' tolerance."""

    tolerance: float = Field(
        DEFAULT_PAIRS_TOLERANCE,
        ge=0,
        le=0.95,
        allow_inf_nan=False,
        description="Fraction below the reference (the baseline, else the peers' median) still healthy.",
    )


class CollectiveCriterion(_Strict):
    """The all-node collective's bus bandwidth, per rail."""

    min_busbw_per_rail_gb_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Least bus bandwidth (GB/s) per rail (the node's HCA ports, 1 without a list). "
        "Default: the matching baseline's floor divided by the rails; none: shown, not judged.",
    )


class ScalingCriterion(_Strict):
    """The all-node run's scaling efficiency against the 1-node run."""

    min_efficiency: float | None = Field(
        None,
        gt=0,
        le=1.5,
        allow_inf_nan=False,
        description="Least speedup / devices of the all-node run. Default: the lower bound of a published "
        "reference point of the configuration; none: shown, not judged.",
    )


class BalanceCriterion(_Strict):
    """The all-node run's slowest node against its fastest (explain's straggler rule)."""

    max_compute_ratio: float = Field(
        DEFAULT_COMPUTE_RATIO,
        ge=1,
        allow_inf_nan=False,
        description="Most the slowest node's useful compute per step may exceed the fastest's, as a ratio.",
    )


class Criteria(_Strict):
    """Every threshold `accept` judges by; each unset one has its default."""

    health: SeverityCriterion = Field(default_factory=SeverityCriterion)
    topology: SeverityCriterion = Field(default_factory=SeverityCriterion)
    pairs: PairsCriterion = Field(default_factory=PairsCriterion)
    collective: CollectiveCriterion = Field(default_factory=CollectiveCriterion)
    scaling: ScalingCriterion = Field(default_factory=ScalingCriterion)
    balance: BalanceCriterion = Field(default_factory=BalanceCriterion)


_FIX = {
    "extra_forbidden": "remove the key or correct its spelling; allowed: {allowed}",
    "literal_error": "use one of the values named",
    "greater_than": "use a larger number",
    "greater_than_equal": "use a larger number",
    "less_than_equal": "use a smaller number",
    "float_parsing": "write a number",
    "float_type": "write a number",
    "finite_number": "write a finite number",
    "model_type": "write a mapping (key: value lines)",
}


def _allowed(loc: tuple[str | int, ...]) -> str:
    """The keys allowed where ``loc`` points (its parent's model fields)."""
    model: type[BaseModel] = Criteria
    for part in loc[:-1]:
        annotation = model.model_fields[str(part)].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return ", ".join(model.model_fields)


def criteria_error(path: Path, document: Any, exc: ValidationError) -> InputError:
    """One paragraph naming the file, each problem's line and field, and the fix (exit 2)."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = tuple(err["loc"])
        line = line_of(document, loc)
        where = f"{path}, line {line}" if line else str(path)
        fix = _FIX.get(err["type"], "correct the value (docs/accept.md lists every key)")
        lines.append(
            f"{where}, field {format_loc(loc)}: {err['msg']}. Fix: {fix.format(allowed=_allowed(loc))}."
        )
    return InputError("criteria file: " + " ".join(lines))


def parse_criteria(document: Any, path: Path) -> Criteria:
    """``document`` (a criteria file's YAML, read from ``path``) as ``Criteria``; empty: every default.

    Raises:
        InputError: not a mapping, an unknown key or a bad value (file, line, field and fix).
    """
    if document is None:
        return Criteria()
    if not isinstance(document, dict):
        raise InputError(
            f"{path}: a criteria file is a mapping (health, topology, pairs, collective, scaling, balance), not "
            f"{type(document).__name__}. Fix: write e.g. `scaling: {{min_efficiency: 0.8}}`."
        )
    try:
        return Criteria.model_validate(dict(document))
    except ValidationError as exc:
        raise criteria_error(path, document, exc) from None


def load_criteria(path: Path | None) -> Criteria:
    """The criteria in ``path`` (None: every default).

    Raises:
        InputError: as ``load_yaml`` and ``parse_criteria``.
    """
    return Criteria() if path is None else parse_criteria(load_yaml(path), path)
