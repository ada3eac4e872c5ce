"""What a node's dataset directory holds, asked in one read-only shell command (pure).

`data synth` asks before writing (skip a node that holds the same manifest, refuse a directory of
someone else's files) and `run` asks before launching (a dataset missing or empty on a node is refused).
The container sees the dataset at ``run.data``; the node holds it at the source of the mount whose
target covers that path (``host_path``).
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Literal

from clusterctl.data.synth import INCOMPLETE, MANIFEST_NAME, Manifest, read_manifest
from clusterctl.data.tfrecord import SHARDS_DIR
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory

DatasetState = Literal["absent", "empty", "foreign", "manifest"]
"""absent: no such directory; empty: a directory with nothing in it; foreign: files, but no manifest
`data synth` wrote (a user's dataset, or a copy of ImageNet); manifest: one `data synth` wrote."""

# Where `data synth` writes and `run --data` reads when nothing names a directory: the path in the container.
# The nodes hold it at the source of the mount whose target holds it (the sandbox mounts its nodes' /srv
# at /data, so this is /srv/synth on every node and nothing needs editing or restarting).
DEFAULT_DATA = "/data/synth"
# The first line the probe prints; the manifest's text follows it.
_STATE_PREFIX = "CLUSTERCTL_DATASET "


@dataclass(frozen=True)
class NodeDataset:
    """One node's answer: the state of the directory, the manifest where there is one, and whether the
    ImageNet layout (``train/`` and ``val/``) is there."""

    node: str
    path: str
    state: DatasetState
    manifest: Manifest | None = None
    layout: bool = False
    tfrecords: bool = False
    """Whether ``tfrecords/`` holds training shards (``train-*-of-*``) for tf_cnn_benchmarks."""

    @property
    def incomplete(self) -> bool:
        """Whether `data synth` is writing here, or was interrupted while it did: its manifest says so."""
        return self.manifest is not None and self.manifest.digest == INCOMPLETE

    @property
    def usable(self) -> bool:
        """Whether a run can read a dataset here: a non-empty directory with train/ and val/, not one a
        `data synth` left half-written (its files, shards included, may be cut short)."""
        return self.state in ("foreign", "manifest") and self.layout and not self.incomplete


def probe_command(path: str) -> str:
    """The shell command that prints the state of ``path`` (and its manifest's text): reads only."""
    p = shlex.quote(path)
    m = shlex.quote(posixpath.join(path, MANIFEST_NAME))
    return (
        f"if [ ! -d {p} ]; then echo '{_STATE_PREFIX}absent'; "
        f"elif [ -z \"$(ls -A {p})\" ]; then echo '{_STATE_PREFIX}empty'; "
        f"else layout=0; [ -d {p}/train ] && [ -d {p}/val ] && layout=1; "
        f'shards=0; for f in {p}/{SHARDS_DIR}/train-*-of-*; do [ -f "$f" ] && shards=1; break; done; '
        f'if [ -f {m} ]; then echo "{_STATE_PREFIX}manifest $layout $shards"; head -c 16777216 {m}; '
        f'else echo "{_STATE_PREFIX}foreign $layout $shards"; fi; fi'
    )


def parse_probe(node: str, path: str, stdout: str) -> NodeDataset | None:
    """The answer in ``stdout``; None when the probe printed no state line (it did not run)."""
    first, _, rest = stdout.partition("\n")
    if not first.startswith(_STATE_PREFIX):
        return None
    words = first[len(_STATE_PREFIX) :].split()
    state = words[0] if words else ""
    layout = len(words) > 1 and words[1] == "1"
    shards = len(words) > 2 and words[2] == "1"
    if state in ("absent", "empty"):
        return NodeDataset(node, path, state)  # type: ignore[arg-type]  # checked just above
    if state == "foreign":
        return NodeDataset(node, path, "foreign", layout=layout, tfrecords=shards)
    if state == "manifest":
        manifest = read_manifest(rest)
        # A manifest that does not read is no proof that `data synth` wrote the files: someone else's.
        return NodeDataset(node, path, "manifest" if manifest else "foreign", manifest, layout, shards)
    return None


def host_path(inventory: Inventory, container_path: str) -> str:
    """Where the nodes hold what the container sees at ``container_path``: through ``container.mounts``.

    Raises:
        InputError: no mount's target holds ``container_path``.
    """
    covering = [
        m for m in inventory.container.mounts
        if container_path == m.target.rstrip("/") or container_path.startswith(m.target.rstrip("/") + "/")
    ]  # fmt: skip
    best = max(covering, key=lambda m: len(m.target.rstrip("/")), default=None)
    if best is None:
        parent = posixpath.dirname(container_path.rstrip("/")) or "/"
        where = f"{inventory.source}, field container.mounts" if inventory.source else "container.mounts"
        targets = ", ".join(m.target for m in inventory.container.mounts) or "none"
        raise InputError(
            f"{where}: the dataset's path in the container, {container_path} (--data, run.data or data "
            f"synth's default), is under no mount's target (targets: {targets}), so the benchmark containers "
            "would not see it and data synth has no directory on the nodes to write. Fix: add a mount to "
            f"container.mounts, e.g. {{source: /srv/datasets, target: {parent}, read_only: true}} (source: a "
            "directory that exists on every node), then `clusterctl up` to start the containers with it; or "
            "name a path under a mount's target."
        )
    rest = container_path[len(best.target.rstrip("/")) :].lstrip("/")
    return posixpath.join(best.source, rest) if rest else best.source
