"""A topology bundle on disk: what `check topology` and `collect` gathered from each node.

Layout::

    DIR/<node>/<key>.txt   the command's raw stdout (readable by `clusterctl inspect`)
    DIR/<node>/meta.json   per key: argv, exit status, status, stderr tail; the node's duration,
                           reachability and connection error

Nothing else is written: no environment, no keys, no inventory, so a bundle can be shared as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from clusterctl.errors import InputError

META = "meta.json"
SectionStatus = Literal["ok", "missing", "failed", "timed-out", "no-answer"]


class SectionMeta(BaseModel):
    """How one collector command went on one node."""

    argv: list[str]
    status: SectionStatus = Field(
        description="ok; missing (not installed); failed (other exit status); timed-out; no-answer "
        "(the node never reported this command)."
    )
    exit_status: int | None = Field(None, description="The command's exit status; None when it never ended.")
    stderr_tail: str = Field("", description="The last part of what the command wrote to stderr.")


class NodeMeta(BaseModel):
    """One node's collection: when, how long, whether it was reached, and each command's outcome."""

    node: str
    collected_at: str = Field(description="UTC time, ISO 8601.")
    duration_s: float = 0.0
    unreachable: bool = False
    error: str | None = Field(None, description="Why the collection did not run or finish.")
    sections: dict[str, SectionMeta] = Field(default_factory=dict)


class NodeBundle(BaseModel):
    """One node's part of a bundle: its meta and the raw stdout of each command, by key."""

    meta: NodeMeta
    outputs: dict[str, str] = Field(default_factory=dict)


def write_bundle(directory: Path, bundles: Mapping[str, NodeBundle]) -> Path:
    """Write ``bundles`` under ``directory`` (created if needed); return ``directory``.

    Raises:
        InputError: the directory cannot be written.
    """
    try:
        for node, bundle in bundles.items():
            node_dir = directory / node
            node_dir.mkdir(parents=True, exist_ok=True)
            for key, text in bundle.outputs.items():
                (node_dir / f"{key}.txt").write_text(text, encoding="utf-8")
            (node_dir / META).write_text(bundle.meta.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the bundle to {directory}: {exc.strerror}. Fix: pass a writable -o DIR."
        ) from exc
    return directory


def read_bundle(directory: Path) -> dict[str, NodeBundle]:
    """Read every ``<node>/meta.json`` under ``directory`` with the outputs it lists.

    Raises:
        InputError: no node directory with a meta.json, or a meta.json that is not one.
    """
    bundles: dict[str, NodeBundle] = {}
    for meta_path in sorted(directory.glob(f"*/{META}")):
        try:
            meta = NodeMeta.model_validate(json.loads(meta_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            raise InputError(
                f"{meta_path} is not a bundle meta.json ({exc}). Fix: collect the bundle again."
            ) from exc
        outputs = {
            key: path.read_text(encoding="utf-8", errors="replace")
            for key in meta.sections
            if (path := meta_path.parent / f"{key}.txt").is_file()
        }
        bundles[meta.node] = NodeBundle(meta=meta, outputs=outputs)
    if not bundles:
        raise InputError(
            f"{directory} holds no bundle (no <node>/{META}). Fix: run `clusterctl collect -o {directory}`."
        )
    return bundles
