"""The image record: what `image build` made (``<cluster state>/image.json``) and the image the
containers run. Local files only: no engine is contacted, so plans (the Slurm batch script, `up`)
read it without loading the docker SDK.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from clusterctl.errors import InputError
from clusterctl.inventory import Inventory
from clusterctl.paths import cluster_state_dir


class ImageRecord(BaseModel):
    """What ``clusterctl image build`` made: read back by ``up``, ``status`` and ``image push``."""

    reference: str = Field(description="The image's tag, e.g. clusterctl/sandbox:cpu-0123456789ab.")
    image_id: str = Field(description="The image ID (sha256:...) on the builder.")
    content_hash: str = Field(description="SHA-256 of the rendered build context.")
    builder: str | None = Field(description="Node the image was built on; None: the local engine.")
    built_at: datetime = Field(description="When the build (or the skip) finished, UTC.")


def record_path(inventory: Inventory) -> Path:
    """Where the image record of this cluster lives."""
    return cluster_state_dir(inventory.cluster.name) / "image.json"


def image_tag(inventory: Inventory, content_hash: str) -> str:
    """The tag a build of ``content_hash`` gets: ``container.image`` if set, else a hash-carrying tag."""
    if inventory.container.image:
        return inventory.container.image
    return f"clusterctl/{inventory.cluster.name}:{inventory.image.profile}-{content_hash[:12]}"


def read_image_record(inventory: Inventory) -> ImageRecord | None:
    """The recorded build of this cluster, or None when nothing was built yet."""
    path = record_path(inventory)
    if not path.is_file():
        return None
    return ImageRecord.model_validate_json(path.read_text())


def effective_image_ref(inventory: Inventory) -> str:
    """The image the containers run: ``container.image`` if set, else the last build's tag.

    Raises:
        InputError: neither is there; the message says to build first.
    """
    if inventory.container.image:
        return inventory.container.image
    record = read_image_record(inventory)
    if record is None:
        raise InputError(
            f"cluster {inventory.cluster.name}: no image built yet ({record_path(inventory)} is missing). "
            "Fix: run `clusterctl image build`, or set container.image in the inventory."
        )
    return record.reference
