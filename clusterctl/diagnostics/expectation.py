"""What the inventory says a node should have (``Expectation``), which the output, host and node rules
judge against (``rules.py``, ``rules_host.py``). Pure. Its own module so that those rule modules, which
import each other's tables, both name it without an import circle."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from clusterctl.diagnostics.nccl_gdr import hca_names
from clusterctl.inventory import Inventory, Node


class Expectation(BaseModel):
    """What a node is expected to have; None fields are not checked."""

    nccl_version: str | None = Field(None, description="The image's NCCL, e.g. 2.5.6; None: unknown.")
    node: str | None = None
    hca: list[str] | None = Field(
        None, description="The HCAs the benchmark uses, e.g. [mlx5_0] (one name is a list of one)."
    )
    rate_gbps: float | None = Field(None, description="Expected link rate.")
    link_layer: str | None = Field(None, description="InfiniBand or Ethernet.")
    gdr_level: int | None = Field(None, description="Configured NCCL_NET_GDR_LEVEL; None: NCCL's default.")

    @field_validator("hca", mode="before")
    @classmethod
    def _device_names(cls, value: Any) -> Any:
        """One name is a list of one; ``mlx5_0:1`` (an HCA port, as NCCL_IB_HCA writes it) names mlx5_0."""
        return hca_names(value) or None


def expectation_for(inventory: Inventory, node: Node) -> Expectation:
    """The expectation the inventory sets for ``node``."""
    layer = {"infiniband": "InfiniBand", "roce": "Ethernet", "ethernet": None}[node.fabric.kind]
    return Expectation(
        node=node.name,
        hca=node.fabric.hca,
        rate_gbps=node.fabric.rate_gbps,
        link_layer=layer,
        gdr_level=inventory.run.gdr_level,
        nccl_version=inventory.image.versions.nccl,
    )
