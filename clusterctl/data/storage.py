"""The storage under ``run.data`` in `check topology`: on every node the dataset is there, it is the same
dataset (file count, bytes, and a SHA-256 of the sorted listing of paths and sizes: any dataset, not only
one `data synth` wrote), and a bounded sample of its files reads at some rate: at least the rate the run
needs (``InputNeed``: training images/s per node, from a recorded run, times the mean JPEG's bytes).

The command is read-only and bounded: the listing is of names and sizes only, and the read sample is at
most ``SAMPLE_FILES`` files. The page cache is not dropped (that needs root on the host and is refused
where impossible), so the rate is an upper bound when the files were read recently.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clusterctl.data.probe import host_path
from clusterctl.data.synth import LISTING_NAME, MANIFEST_NAME
from clusterctl.findings import Finding
from clusterctl.hosts.ssh import run_on_nodes
from clusterctl.inventory import Inventory

SAMPLE_FILES = 200
TIMEOUT_S = 120.0
_PREFIX = "CLUSTERCTL_STORAGE "


@dataclass(frozen=True)
class NodeStorage:
    """One node's dataset: present, its files, bytes and listing digest, and the sample's read rate."""

    node: str
    path: str
    present: bool
    files: int = 0
    bytes: int = 0
    digest: str = ""
    read_mb_s: float | None = None
    jpegs: int = 0
    jpeg_bytes: int = 0

    @property
    def mean_jpeg_bytes(self) -> float | None:
        """The mean size of the dataset's JPEGs (what one training image costs to read); None: none."""
        return self.jpeg_bytes / self.jpegs if self.jpegs else None


@dataclass(frozen=True)
class InputNeed:
    """The training rate each node's storage must feed: images/s per node, and where the figure comes
    from (a recorded run, named), to be multiplied by the mean JPEG's bytes of the node's dataset."""

    images_per_s_per_node: float
    source: str


def storage_command(path: str) -> str:
    """The read-only command printing ``present files bytes digest read_bytes read_seconds jpegs
    jpeg_bytes`` for ``path``."""
    p = shlex.quote(path)
    listing = (
        f"find . -type f ! -name {MANIFEST_NAME} ! -name {LISTING_NAME} -printf '%P\\t%s\\n' | LC_ALL=C sort"
    )
    return (
        f"if [ ! -d {p} ] || [ -z \"$(ls -A {p})\" ]; then echo '{_PREFIX}0'; exit 0; fi; cd {p} || exit 1; "
        f"counts=$({listing} | awk -F '\\t' '{{n++; b+=$2}} $1 ~ /[.]JPEG$/ {{j++; jb+=$2}} "
        f'END {{printf "%d %d %d %d", n, b, j, jb}}\'); set -- $counts; '
        f"digest=$({listing} | sha256sum | cut -d' ' -f1); "
        f"t0=$(date +%s.%N); got=$(find . -type f -name '*.JPEG' -print0 | head -z -n {SAMPLE_FILES} | xargs -0 -r cat | wc -c); "
        't1=$(date +%s.%N); secs=$(awk -v a="$t0" -v b="$t1" \'BEGIN {print b - a}\'); '
        f'echo "{_PREFIX}1 $1 $2 $digest $got $secs $3 $4"'
    )


def parse_storage(node: str, path: str, stdout: str) -> NodeStorage | None:
    """The node's answer, or None when the command printed none."""
    line = next((x for x in stdout.splitlines() if x.startswith(_PREFIX)), None)
    if line is None:
        return None
    words = line[len(_PREFIX) :].split()
    if words[:1] != ["1"] or len(words) < 6:
        return NodeStorage(node, path, present=False)
    try:
        read, seconds = int(words[4]), float(words[5])
        rate = read / seconds / 1e6 if seconds > 0 and read > 0 else None
        jpegs, jpeg_bytes = (int(words[6]), int(words[7])) if len(words) >= 8 else (0, 0)
        return NodeStorage(node, path, True, int(words[1]), int(words[2]), words[3], rate, jpegs, jpeg_bytes)
    except ValueError:
        return None


def storage_findings(inventory: Inventory, need: InputNeed | None = None) -> list[Finding]:
    """`check topology`'s findings on ``run.data``: none for synthetic data. ``need``: the training rate
    the storage must feed (None: unknown, said in each node's read-rate finding).

    Raises:
        InputError: ``run.data`` is under no ``container.mounts`` target.
    """
    if inventory.run.data == "synthetic":
        return []
    path = host_path(inventory, inventory.run.data)
    results = run_on_nodes(inventory, list(inventory.nodes), storage_command(path), timeout_s=TIMEOUT_S)
    answers = {name: parse_storage(name, path, r.stdout) if r.ok else None for name, r in results.items()}
    return judge_storage(inventory.run.data, path, answers, need)


def judge_storage(
    data: str, path: str, answers: dict[str, NodeStorage | None], need: InputNeed | None = None
) -> list[Finding]:
    """Findings from every node's answer: unreadable, missing, differing, each node's read rate against
    the rate the run needs, and the nodes that read slower than that (pure)."""
    findings = []
    for name, answer in answers.items():
        if answer is None:
            findings.append(Finding(severity="error", code="dataset-unreadable", node=name,
                                    message=f"run.data {data}: {path} could not be read on {name}.",
                                    advice="Check the node answers over SSH and the directory's permissions."))  # fmt: skip
        elif not answer.present:
            findings.append(Finding(severity="error", code="dataset-missing", node=name,
                                    message=f"run.data {data}: {path} is missing or empty on {name}.",
                                    advice="Write it there (`clusterctl data synth`, or copy the dataset)."))  # fmt: skip
    present = {n: a for n, a in answers.items() if a is not None and a.present}
    kinds = {(a.files, a.bytes, a.digest) for a in present.values()}
    if len(kinds) > 1:
        shown = "; ".join(
            f"{n}: {a.files} files, {a.bytes / 1e6:.1f} MB, {a.digest[:12]}" for n, a in present.items()
        )
        findings.append(Finding(severity="error", code="dataset-differs",
                                message=f"run.data {data}: the nodes hold different datasets at {path} ({shown}).",
                                advice="Make every node hold the same files (`clusterctl data synth` skips nodes "
                                "that already match), or mount one shared copy."))  # fmt: skip
    for name, answer in present.items():
        findings.extend(_read_rate(data, name, answer, need))
    return findings


def _needed_mb_s(answer: NodeStorage, need: InputNeed | None) -> tuple[float | None, str]:
    """The MB/s the node must read for the run, and how it was found (or why it is unknown)."""
    if need is None:
        return None, (
            "the rate the run needs is unknown: no valid training run on this inventory's device is "
            "recorded in the runs directory (`clusterctl run resnet50` records one)"
        )
    mean = answer.mean_jpeg_bytes
    if mean is None:
        return None, "the rate the run needs is unknown: the dataset holds no .JPEG file"
    mb_s = need.images_per_s_per_node * mean / 1e6
    return mb_s, (
        f"the run needs {mb_s:,.2f} MB/s ({need.images_per_s_per_node:,.1f} img/s per node x "
        f"{mean / 1e3:,.1f} KB per JPEG; img/s: {need.source})"
    )


def _read_rate(data: str, name: str, answer: NodeStorage, need: InputNeed | None) -> list[Finding]:
    """A node's read-rate finding, and ``dataset-read-slow`` when it reads slower than the run needs."""
    needed, how = _needed_mb_s(answer, need)
    rate = "not measured" if answer.read_mb_s is None else f"{answer.read_mb_s:,.1f} MB/s"
    found = [Finding(severity="info", code="dataset-read-rate", node=name,
                     message=f"run.data {data}: {answer.files} files, {answer.bytes / 1e6:.1f} MB; a sample of up "
                     f"to {SAMPLE_FILES} JPEGs read at {rate} (page cache not dropped); {how}.")]  # fmt: skip
    if needed is not None and answer.read_mb_s is not None and answer.read_mb_s < needed:
        found.append(Finding(severity="warning", code="dataset-read-slow", node=name,
                             message=f"run.data {data}: {name} reads its dataset at {answer.read_mb_s:,.2f} MB/s, "
                             f"below what training needs: {how}.",
                             advice="Training will wait on input (input-bound). Copy the dataset onto each node's "
                             "local disk (`clusterctl data synth` per node, or a copy), keep it in the page cache "
                             "(memory above the dataset's size), give the loader more workers "
                             "(run.loader_workers), or use faster storage. The measure reads one file at a time, "
                             "so more workers may read faster than it says."))  # fmt: skip
    return found
