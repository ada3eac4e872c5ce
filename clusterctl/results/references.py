"""References kept as data (``references.yml``) and the one pure function that judges against them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.yamlio import load_yaml

DEFAULT_REFERENCES = Path(__file__).with_name("references.yml")


class ReferencePoint(BaseModel):
    """One expected number: ``value`` with fractional bounds ``lower`` (<= 0) and ``upper`` (>= 0)."""

    model_config = ConfigDict(extra="forbid")

    devices: int = Field(ge=1)
    metric: Literal["speedup", "efficiency", "total_images_per_sec"]
    value: float
    lower: float = Field(le=0)
    upper: float = Field(ge=0)
    unit: str

    def bounds(self) -> tuple[float, float]:
        """The accepted interval."""
        return self.value * (1 + self.lower), self.value * (1 + self.upper)


class Reference(BaseModel):
    """A published result: where it comes from, which configurations it applies to, its points."""

    model_config = ConfigDict(extra="forbid")

    name: str
    source: str
    match: dict[str, str | int]
    points: list[ReferencePoint]


class Comparison(BaseModel):
    """An observed number against a reference point."""

    reference: str
    metric: str
    devices: int
    observed: float
    expected: float
    lower_bound: float
    upper_bound: float
    unit: str
    verdict: Literal["within", "below", "above"]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    references: list[Reference]


def load_references(path: Path = DEFAULT_REFERENCES) -> list[Reference]:
    """The references in ``path`` (default: the shipped ``references.yml``)."""
    return _File.model_validate(load_yaml(path)).references


def compare(reference: Reference, point: ReferencePoint, observed: float) -> Comparison:
    """Judge ``observed`` against ``point``: within its bounds, below or above."""
    low, high = point.bounds()
    verdict = "below" if observed < low else "above" if observed > high else "within"
    return Comparison(
        reference=reference.name,
        metric=point.metric,
        devices=point.devices,
        observed=observed,
        expected=point.value,
        lower_bound=low,
        upper_bound=high,
        unit=point.unit,
        verdict=verdict,
    )
