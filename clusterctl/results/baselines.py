"""Expected figures per hardware type (``baselines.yml``), each with its public source, and the one
pure lookup that finds the baseline of a configuration; a site's own figures (the inventory's
``baselines`` file, written by `clusterctl baseline save`) come first.

A baseline matches a configuration when every key of its ``match`` equals the configuration's value
(a GPU model matches by substring: "H100" matches "NVIDIA H100 80GB HBM3"). ``floor`` is the lowest
healthy value: ``value * (1 - tolerance)``.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ruamel.yaml import YAML

from clusterctl.errors import InputError
from clusterctl.yamlio import load_yaml

if TYPE_CHECKING:
    from clusterctl.inventory import Inventory

DEFAULT_BASELINES = Path(__file__).with_name("baselines.yml")
# The collective's figure: nccl-tests' (or the CPU allreduce's) bus bandwidth at the large sizes.
BUSBW_METRIC = "nccl_allreduce_busbw_peak"


class Baseline(BaseModel):
    """One expected figure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    metric: str = Field(description="What is measured, e.g. nccl_allreduce_busbw_peak.")
    match: dict[str, str | int] = Field(description="The configuration it applies to.")
    value: float = Field(gt=0, allow_inf_nan=False, description="The figure: finite and above zero.")
    unit: str
    tolerance: float = Field(
        ge=0, lt=1, allow_inf_nan=False, description="Fraction below value still healthy."
    )
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


def hardware_config(inventory: Inventory, nodes: int) -> dict[str, str | int]:
    """What a baseline's ``match`` is compared with: a run of ``nodes`` nodes of ``inventory``'s hardware
    (its primary's: the inventory keeps the nodes alike)."""
    node = inventory.primary
    config: dict[str, str | int] = {
        "nodes": nodes,
        "gpus_per_node": node.gpus.count,
        "fabric": node.fabric.kind,
    }
    if node.gpus.model:
        config["gpu"] = node.gpus.model
    if node.fabric.rate_gbps:
        config["hca_rate_gbps"] = int(node.fabric.rate_gbps)
    return config


def site_baselines(path: Path | None) -> list[Baseline]:
    """The site's baselines in ``path`` (None, or no such file yet: none).

    Raises:
        InputError: the file is not a baselines file.
    """
    if path is None or not path.exists():
        return []
    try:
        return load_baselines(path)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise InputError(
            f"baselines file {path} (the inventory's baselines): {where}: {problem['msg']}. Fix: correct the "
            "entry (the shipped clusterctl/results/baselines.yml shows the format), or write it again with "
            "`clusterctl baseline save`."
        ) from None


def baselines_for(inventory: Inventory) -> list[Baseline]:
    """The site's baselines first (they win a tie), then the shipped ones."""
    return site_baselines(inventory.baselines) + load_baselines()


def save_baseline(path: Path, baseline: Baseline) -> None:
    """Add ``baseline`` to the site's file ``path`` (created when missing), replacing an entry of its name.

    Raises:
        InputError: ``path`` holds something that is not a baselines file.
    """
    kept = [b for b in site_baselines(path) if b.name != baseline.name]
    document = {"baselines": [b.model_dump() for b in [*kept, baseline]]}
    header = (
        "# This site's own baselines, written by `clusterctl baseline save` (the inventory's `baselines`).\n"
    )
    text = io.StringIO()
    writer = YAML(typ="safe", pure=True)  # ruamel.yaml, the YAML library clusterctl declares
    writer.default_flow_style = False
    writer.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # keep the fields' order
    writer.dump(document, text)
    path.write_text(header + text.getvalue())
