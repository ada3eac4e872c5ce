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
from clusterctl.inventory import Inventory
from clusterctl.readfile import read_capped

META = "meta.json"
# The largest command output read back from a file (a bundle's section, a file given to inspect): a
# long NCCL INFO log is a few MB, and every parser and rule is linear in it.
MAX_OUTPUT_BYTES = 32 << 20
# A meta.json lists a few dozen sections with short stderr tails.
MAX_META_BYTES = 1 << 20
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

    A node is the directory its meta.json sits in; the ``node`` that meta.json names must be the same
    (a copied or renamed directory would otherwise stand in for, and hide, the node it names).

    Raises:
        InputError: ``directory`` does not exist, holds no node directory with a meta.json, or holds a
            meta.json that is not one (nested too deep included), names another node than its
            directory, or a file over its cap (``MAX_META_BYTES``, ``MAX_OUTPUT_BYTES``).
    """
    fix = (
        "Fix: pass the directory `clusterctl check topology --bundle DIR` or `clusterctl collect -o DIR` "
        "wrote (a run directory keeps its bundle in topology/), or collect one with `clusterctl collect -o DIR`."
    )
    if not directory.exists():
        raise InputError(f"{directory} does not exist, so there is no bundle to read. {fix}")
    bundles: dict[str, NodeBundle] = {}
    for meta_path in sorted(directory.glob(f"*/{META}")):
        meta = _read_meta(meta_path)
        node = meta_path.parent.name
        if meta.node != node:
            also = f" (and {directory / meta.node} is there too)" if (directory / meta.node).is_dir() else ""
            raise InputError(
                f"{meta_path} says node {meta.node!r}, but it sits in the directory of node {node!r}{also}: "
                "a bundle's node is its directory, and the two must agree. Fix: remove the copied or "
                f"renamed directory {meta_path.parent}, or collect the bundle again."
            )
        fix = "collect the bundle again, or cut the section to its relevant part"
        outputs = {
            key: read_capped(path, MAX_OUTPUT_BYTES, fix).decode("utf-8", errors="replace")
            for key in meta.sections
            if (path := meta_path.parent / f"{key}.txt").is_file()
        }
        bundles[node] = answered(NodeBundle(meta=meta, outputs=outputs))
    if not bundles:
        raise InputError(f"{directory} holds no bundle (no <node>/{META} in it). {fix}")
    return bundles


def answered(bundle: NodeBundle) -> NodeBundle:
    """``bundle`` with every section its meta calls ok but whose output it lacks (a file deleted from a
    saved bundle) as ``no-answer``, the reason in its stderr tail: an output that is not there is not
    an empty one, and no rule may judge it as one."""
    lost = [
        key
        for key, section in bundle.meta.sections.items()
        if section.status == "ok" and key not in bundle.outputs
    ]
    if not lost:
        return bundle
    sections = dict(bundle.meta.sections)
    for key in lost:
        why = f"meta.json says it ran, but its output {key}.txt is not in the bundle"
        sections[key] = sections[key].model_copy(update={"status": "no-answer", "stderr_tail": why})
    return bundle.model_copy(update={"meta": bundle.meta.model_copy(update={"sections": sections})})


def _read_meta(meta_path: Path) -> NodeMeta:
    """One meta.json, validated.

    Raises:
        InputError: not a bundle meta.json: not JSON, nested past the parser's depth, or not its shape.
    """
    try:
        return NodeMeta.model_validate(
            json.loads(read_capped(meta_path, MAX_META_BYTES, "collect the bundle again"))
        )
    except (ValueError, ValidationError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(
            f"{meta_path} is not a bundle meta.json ({why}). Fix: collect the bundle again."
        ) from None


def read_bundle_of(directory: Path, inventory: Inventory) -> dict[str, NodeBundle]:
    """Read the bundle in ``directory``; every node in it must be one of the inventory's nodes.

    An inventory node the bundle lacks is no error here: the judgement reports it (node-not-in-bundle).

    Raises:
        InputError: what :func:`read_bundle` raises, or a node the inventory does not have (the bundle
            was collected with another inventory).
    """
    bundles = read_bundle(directory)
    names = [node.name for node in inventory.nodes]
    strangers = sorted(set(bundles) - set(names))
    if strangers:
        raise InputError(
            f"the bundle {directory} holds nodes that inventory {inventory.cluster.name!r} does not have: "
            f"{', '.join(strangers)} (its nodes: {', '.join(names)}). Fix: pass the inventory the bundle was "
            "collected with (-i FILE), or a bundle collected from this inventory's nodes."
        )
    return bundles
