"""Expected figures per hardware type (``baselines.yml``), each with its public source, and the one
pure lookup that finds the baseline of a configuration.

A baseline matches a configuration when every key of its ``match`` equals the configuration's value
(a GPU model matches by substring: "H100" matches "NVIDIA H100 80GB HBM3"). ``floor`` is the lowest
healthy value: ``value * (1 - tolerance)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.yamlio import load_yaml

DEFAULT_BASELINES = Path(__file__).with_name("baselines.yml")


class Baseline(BaseModel):
    """One expected figure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    metric: str = Field(description="What is measured, e.g. nccl_allreduce_busbw_peak.")
    match: dict[str, str | int] = Field(description="The configuration it applies to.")
    value: float = Field(gt=0)
    unit: str
    tolerance: float = Field(ge=0, lt=1, description="Fraction below value still healthy.")
    source: str = Field(min_length=10, description="Where the number was published.")

    @property
    def floor(self) -> float:
        """The lowest healthy measurement."""
        return self.value * (1 - self.tolerance)

    def matches(self, config: Mapping[str, str | int]) -> bool:
        """Whether every key of ``match`` agrees with ``config`` (GPU models by substring)."""
        for key, wanted in self.match.items():
            have = config.get(key)
            if key == "gpu" and isinstance(have, str) and gpu_matches(str(wanted), have):
                continue
            if have != wanted:
                return False
        return True


def gpu_matches(wanted: str, model: str) -> bool:
    """Whether the GPU ``model`` (an inventory's or nvidia-smi's name) is ``wanted``: by substring, any case."""
    return wanted.lower() in model.lower()


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    baselines: list[Baseline]


def load_baselines(path: Path = DEFAULT_BASELINES) -> list[Baseline]:
    """The baselines in ``path`` (default: the shipped ``baselines.yml``)."""
    return _File.model_validate(load_yaml(path)).baselines


def find_baseline(metric: str, config: Mapping[str, str | int], baselines: list[Baseline]) -> Baseline | None:
    """The baseline of ``metric`` for ``config``: the one matching the most keys, or None."""
    candidates = [b for b in baselines if b.metric == metric and b.matches(config)]
    return max(candidates, key=lambda b: len(b.match), default=None)
