"""What a batch job saw of its nodes: the snapshot it takes on every node of the allocation, read back.

The batch script runs ``job_collectors`` (``check topology``'s collectors and the node's fabric
counters, ``clusterctl.diagnostics.counter_probe``) on every node it got, before and after the run, into
``<job directory>/topology-{before,after}-<node>.txt``: the nodes the run really ran on, which a
scheduler may pick outside the inventory's; and the node telemetry sampler during the run, into
``telemetry-<node>.jsonl``. ``job_files_command`` prints those files framed in one
SSH call to the login node, ``split_job_files`` cuts them apart and ``read_job_snapshots`` turns
them into the run directory's bundles and the before/after counter readings the proof by counters
judges. Pure, except nothing: the SSH call is the backend's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from clusterctl.diagnostics.bundle import NodeBundle
from clusterctl.diagnostics.collectors import COLLECTORS, Collector, node_bundle, split_sections
from clusterctl.diagnostics.counter_probe import COUNTERS_KEY, counters_collector, node_counters
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters
from clusterctl.hosts.command import CommandResult
from clusterctl.inventory import FabricSpec
from clusterctl.results.counters import CounterReadings

# Where each moment's bundle goes in the run directory: before the run, as the ssh launcher's snapshot.
MOMENT_DIRS = {"before": "topology", "after": "topology-after"}
# %N in the batch script's --output: a Slurm node name (never a path: it names a bundle directory).
SNAPSHOT_FILE = re.compile(r"^topology-(?P<moment>before|after)-(?P<node>[A-Za-z0-9][A-Za-z0-9._-]*)\.txt$")
# The node telemetry sampler's output, one file per node (srun's --output with %N).
TELEMETRY_FILE = re.compile(r"^telemetry-(?P<node>[A-Za-z0-9][A-Za-z0-9._-]*)\.jsonl$")
_FILE_MARK = "@@clusterctl-file@@"
_FRAME = re.compile(rf"\n{_FILE_MARK} (\S+)\n")


def job_collectors(fabric: FabricSpec) -> tuple[Collector, ...]:
    """``check topology``'s collectors, then the fabric counters of ``fabric`` (read last: closest to
    the run before it; the ssh backend reads the same collector over SSH)."""
    return (*COLLECTORS, counters_collector(fabric))


def job_files_command(directory: str) -> list[str]:
    """argv printing every snapshot and telemetry file of the job directory, each after a ``MARK <name>``
    line."""
    script = (
        'cd -- "$1" || exit 0; for f in topology-before-*.txt topology-after-*.txt telemetry-*.jsonl; do '
        f'[ -f "$f" ] && printf "\\n%s %s\\n" {_FILE_MARK} "$f" && cat -- "$f"; done; exit 0'
    )
    return ["sh", "-c", script, "snapshots", directory]


def split_job_files(output: str) -> dict[str, str]:
    """The files ``job_files_command`` printed, by name."""
    parts = _FRAME.split(output)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@dataclass(frozen=True)
class JobSnapshots:
    """The job's snapshots as bundles (by run-directory folder, then node), its counter readings, each
    node's telemetry sampler output and why a node that took a snapshot has none."""

    bundles: dict[str, dict[str, NodeBundle]]
    counters: CounterReadings | None
    telemetry: dict[str, str]
    telemetry_errors: dict[str, str]


def read_job_snapshots(files: Mapping[str, str], fabric: FabricSpec, collected_at: str) -> JobSnapshots:
    """Bundles and counter readings from the job's snapshot files (other names are ignored).

    A node with a snapshot at one moment and none (or no counters) at the other gets a reading with
    the reason, so the proof calls its traffic unknown; no snapshot at all: no readings.
    """
    by_moment: dict[str, dict[str, str]] = {"before": {}, "after": {}}
    for name, text in files.items():
        if m := SNAPSHOT_FILE.match(name):
            by_moment[m["moment"]][m["node"]] = text
    collectors = job_collectors(fabric)
    bundles = {
        MOMENT_DIRS[moment]: {
            node: node_bundle(
                CommandResult(node, f"snapshot {moment} the run", 0, text), collected_at, collectors
            )
            for node, text in sorted(texts.items())
        }
        for moment, texts in by_moment.items()
        if texts
    }
    nodes = sorted(by_moment["before"].keys() | by_moment["after"].keys())
    telemetry = {m["node"]: text for name, text in files.items() if (m := TELEMETRY_FILE.match(name))}
    missing = {node: "the job left no telemetry file" for node in nodes if node not in telemetry}
    if not nodes:
        return JobSnapshots(bundles, None, telemetry, missing)
    before, after = (
        {node: _reading(texts.get(node), moment, node, fabric) for node in nodes}
        for moment, texts in by_moment.items()
    )
    return JobSnapshots(bundles, (before, after), telemetry, missing)


def _reading(text: str | None, moment: str, node: str, fabric: FabricSpec) -> NodeCounters:
    if text is None:
        return NodeCounters(error=f"{node}: the job left no snapshot {moment} the run")
    section = split_sections(text).get(COUNTERS_KEY)
    if section is None:
        return NodeCounters(error=f"{node}: the snapshot {moment} the run has no fabric counters")
    return node_counters(counters_collector(fabric), section.stdout)
