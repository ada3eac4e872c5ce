"""`data synth` on the nodes: the dataset rendered once here, then written onto every node that lacks it.

Each node is asked first (``probe``), all before anything is written: a node holding the same manifest
is skipped; a directory holding files `data synth` did not write is refused (exit 2, naming the node
and the path) and nothing is written anywhere. The dataset travels as one tar archive over SFTP, beside
the dataset, and is switched in by ``switch.write_script``: unpacked aside, the old dataset (the files its
listing names, never a path outside it) taken down under an incomplete manifest, the new files moved in,
the complete manifest last; a file clusterctl did not write is never replaced or removed. A full disk
here, while the archive is made, is an EnvironmentProblem (exit 2). With ``shared``, the directory is
one shared file system: written once, through the first node, and read back on the others.
"""

from __future__ import annotations

import errno
import io
import posixpath
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clusterctl.data.probe import NodeDataset, host_path, parse_probe, probe_command
from clusterctl.data.shards import ShardWriter
from clusterctl.data.switch import ARCHIVE, REFUSAL, REFUSED, prepare_script, uploads, write_script
from clusterctl.data.synth import (
    MANIFEST_NAME,
    Manifest,
    SynthSpec,
    listing_line,
    make_manifest,
    render_all,
)
from clusterctl.data.tfrecord import SHARDS_DIR
from clusterctl.errors import ConnectError, EnvironmentProblem, InputError, StepError
from clusterctl.hosts.command import CommandResult
from clusterctl.hosts.sftp import write_file
from clusterctl.hosts.ssh import connect, fan_out, run, run_on_nodes
from clusterctl.inventory import Inventory, Node

PROBE_TIMEOUT_S = 60.0
# Unpacking on a node: generous for a few GB on a slow disk; every call is bounded all the same.
WRITE_TIMEOUT_S = 1800.0

Outcome = Literal["written", "skipped", "seen"]
"""written: the dataset was written there; skipped: it held the same manifest; seen (shared storage):
the first node's write is visible there."""


@dataclass(frozen=True)
class NodeSynth:
    """What `data synth` did on one node."""

    node: str
    path: str
    outcome: Outcome
    seconds: float = 0.0


@dataclass(frozen=True)
class SynthResult:
    """The dataset (its manifest) and what happened on every node."""

    manifest: Manifest
    nodes: list[NodeSynth]


def render_archive(
    spec: SynthSpec, into: Path, progress: Callable[[int, int], None]
) -> tuple[Manifest, list[str]]:
    """Render every image of ``spec`` into the tar archive ``into`` (and, where the spec asks, its TFRecord
    shards, built beside ``into``); the manifest of what it holds, and its paths.

    ``progress(done, total)`` is called after each image. The archive's entries are 0644, owned by root,
    dated 0: the same spec gives the same archive.
    """
    total = spec.count()
    lines = []
    shards = ShardWriter(spec, into.parent / "shards")
    with tarfile.open(into, "w") as tar:
        for done, (file, data) in enumerate(render_all(spec), start=1):
            info = tarfile.TarInfo(file.path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            lines.append(listing_line(file.path, data))
            shards.add(file, data)
            progress(done, total)
        lines += shards.close_into(tar)
    return make_manifest(spec, lines), [line.split("\t")[0] for line in lines]


def probe_nodes(inventory: Inventory, nodes: list[Node], path: str) -> dict[str, NodeDataset]:
    """Every node's answer for ``path``, in parallel.

    Raises:
        ConnectError: a node could not be asked (unreachable, or the probe did not answer).
    """
    results = run_on_nodes(inventory, nodes, probe_command(path), timeout_s=PROBE_TIMEOUT_S)
    answers = {}
    for node in nodes:
        result = results[node.name]
        answer = parse_probe(node.name, path, result.stdout) if result.ok else None
        if answer is None:
            why = result.error or f"exit {result.exit_code}: {result.stderr.strip()[:200]}"
            raise ConnectError(f"{node.name}: could not read {path} ({why}).")
        answers[node.name] = answer
    return answers


def refuse_foreign(answers: dict[str, NodeDataset]) -> None:
    """Raise InputError when a node's directory holds files `data synth` did not write."""
    foreign = [a for a in answers.values() if a.state == "foreign"]
    if foreign:
        where = ", ".join(f"{a.node}:{a.path}" for a in foreign)
        raise InputError(
            f"data synth: {where} already holds files that `clusterctl data synth` did not write (no "
            f"{MANIFEST_NAME} there); nothing was written on any node. Fix: name a new or empty directory "
            "with --path (data synth never replaces files it did not write)."
        )


def _write_node(
    inventory: Inventory,
    node: Node,
    path: str,
    archive: Path,
    manifest: Manifest,
    paths: list[str],
) -> NodeSynth | CommandResult:
    """Write the dataset onto one node at ``path``: uploaded aside, then switched in by ``write_script``
    (which takes down what an earlier synth listed there); its outcome, or the command that failed there."""
    try:
        conn = connect(inventory, node)
    except ConnectError as exc:
        return CommandResult(node.name, "connect", None, error=str(exc), unreachable=True)
    with conn:
        made = run(conn, node, ["sh", "-c", prepare_script(path)], timeout_s=WRITE_TIMEOUT_S)
        if not made.ok:
            return made
        sftp = conn.sftp()
        try:
            for name, data in uploads(manifest, paths).items():
                write_file(sftp, data, posixpath.join(path, name), 0o644)
            write_file(sftp, archive, posixpath.join(path, ARCHIVE), 0o600)
        except OSError as exc:
            return CommandResult(node.name, "sftp", None, error=f"writing {path}: {exc}")
        result = run(conn, node, ["sh", "-c", write_script(path)], timeout_s=WRITE_TIMEOUT_S)
        if not result.ok:
            return result
        return NodeSynth(node.name, path, "written", made.duration_s + result.duration_s)


def _render(spec: SynthSpec, progress: Callable[[int, int], None], tmp: str) -> tuple[Manifest, list[str]]:
    """``render_archive`` into ``tmp``, a full or failing local disk turned into an EnvironmentProblem."""
    try:
        return render_archive(spec, Path(tmp) / "dataset.tar", progress)
    except OSError as exc:
        raise _local_disk_problem(exc, spec) from None


def _local_disk_problem(exc: OSError, spec: SynthSpec) -> EnvironmentProblem:
    """What a failed write of the archive on this machine (the controller) means, and what to do."""
    where = tempfile.gettempdir()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        problem = "the disk is full (no space left, or over quota)"
    else:
        problem = f"{exc.strerror or exc}"
    return EnvironmentProblem(
        f"data synth: writing the dataset's archive ({spec.count()} images) on this machine, in {where} "
        f"(TMPDIR), failed: {problem}; nothing was written on any node. Fix: free space there, or point "
        "TMPDIR at a file system with room for the whole dataset, and run again."
    )


def synth_on_nodes(
    inventory: Inventory,
    nodes: list[Node],
    path: str,
    spec: SynthSpec,
    *,
    shared: bool = False,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> SynthResult:
    """Make the dataset of ``spec`` at ``path`` on every node of ``nodes`` (once, with ``shared``).

    Raises:
        InputError: a node's ``path`` holds files `data synth` did not write (nothing written anywhere).
        ConnectError: a node could not be asked.
        StepError: the write failed on a node (each failing node named), or, with ``shared``, a node
            does not see what the first node wrote.
    """
    answers = probe_nodes(inventory, nodes, path)
    refuse_foreign(answers)
    try:
        scratch = tempfile.TemporaryDirectory(prefix="clusterctl-synth-")
    except OSError as exc:
        raise _local_disk_problem(exc, spec) from None
    with scratch as tmp:
        archive = Path(tmp) / "dataset.tar"
        manifest, paths = _render(spec, progress, tmp)
        same = {name for name, a in answers.items() if a.manifest and a.manifest.digest == manifest.digest}
        targets = [n for n in nodes if n.name not in same]
        if shared and targets:
            targets = targets[:1]
        results = fan_out(
            targets,
            lambda n: _write_node(inventory, n, path, archive, manifest, paths),
            deadline_s=WRITE_TIMEOUT_S + 120,
        )
    failed = [r for r in results.values() if isinstance(r, CommandResult)]
    refused = [r for r in failed if r.exit_code == REFUSED and REFUSAL in r.stderr]
    if refused:
        lines = "; ".join(f"{r.node}: {r.stderr.split(REFUSAL, 1)[1].strip()[:400]}" for r in refused)
        raise InputError(f"data synth: {path} was refused on {len(refused)} node(s): {lines}")
    if failed:
        lines = "; ".join(
            f"{r.node}: {r.error or f'exit {r.exit_code}: {r.stderr.strip()[:300]}'}" for r in failed
        )
        raise StepError(f"data synth: writing {path} failed on {len(failed)} node(s): {lines}")
    outcomes = {name: r for name, r in results.items() if isinstance(r, NodeSynth)}
    if shared:
        _check_shared(inventory, nodes, path, manifest, outcomes)
    return SynthResult(
        manifest,
        [
            outcomes.get(n.name) or NodeSynth(n.name, path, "skipped" if n.name in same else "seen")
            for n in nodes
        ],
    )


def _check_shared(
    inventory: Inventory, nodes: list[Node], path: str, manifest: Manifest, written: dict[str, NodeSynth]
) -> None:
    """Raise StepError when a node does not see, at ``path``, the dataset written through another."""
    if not written:
        return
    answers = probe_nodes(inventory, nodes, path)
    blind = [name for name, a in answers.items() if not a.manifest or a.manifest.digest != manifest.digest]
    if blind:
        raise StepError(
            f"data synth --shared: {', '.join(blind)} do(es) not see the dataset written at {path} through "
            f"{next(iter(written))}: {path} is not one shared file system on these nodes. Fix: run without "
            "--shared (the dataset is then written onto every node)."
        )


def require_dataset(
    inventory: Inventory, nodes: list[Node], container_path: str, *, tfrecords: bool = False
) -> None:
    """Refuse a run whose dataset (``run.data``, seen through ``container.mounts``) is missing or empty
    on a node, before anything starts; with ``tfrecords`` (tf_cnn_benchmarks reading
    ``<run.data>/tfrecords``), one without training shards there too.

    Raises:
        InputError: no mount holds ``container_path``, or a node lacks the dataset (each named, with the
            path on the node).
        ConnectError: a node could not be asked.
    """
    path = host_path(inventory, container_path)
    answers = probe_nodes(inventory, nodes, path)
    lacking = [a for a in answers.values() if not a.usable or (tfrecords and not a.tfrecords)]
    if lacking:
        where = "; ".join(f"{a.node}:{a.path} is {_lacks(a)}" for a in lacking)
        raise InputError(
            f"run.data {container_path}: the dataset is missing on {len(lacking)} node(s) ({where}); nothing was "
            "started. Fix: make it there (`clusterctl data synth`, with --tfrecords N for tf_cnn_benchmarks, or "
            "copy your ImageNet-layout directory), or run with --data synthetic."
        )


def _lacks(answer: NodeDataset) -> str:
    """What a node's dataset lacks, in words."""
    if answer.state in ("absent", "empty"):
        return answer.state
    if answer.incomplete:
        return "half-written (its manifest says incomplete: a `data synth` was interrupted or is writing it)"
    if not answer.layout:
        return "without train/ and val/"
    return f"without {SHARDS_DIR}/train-*-of-* (TFRecord shards)"
