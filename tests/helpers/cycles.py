"""The load cycle of issue 15 (part 4): an N-node sandbox, then provision + image build + image push +
up + run + down, K times in a row, with everything that could leak listed before and after.

Used by ``tests/load/test_load.py`` (marker ``load``, not in the default run) and by
``bench/load_cycles.py`` (prints the figures). Each command runs as its own ``python -m clusterctl``
process, as a user would run it; the sandbox has its own name, subnet and state directory and is
removed at the end, by name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

from clusterctl.sandbox import cluster as sandbox_cluster
from clusterctl.sandbox.plan import LABEL
from clusterctl.sandbox.scratch import unique_name, untag_cluster_images
from tests.helpers.sandbox import free_subnet

_STATUS_STAMP = re.compile(r"status/\d{8}T\d{6}Z/")
# Small enough to run 8 ranks on a 2-core machine; the cycle tests the tool, not the payload.
RUN_ARGS = ("--steps", "2", "--warmup-steps", "1", "--batch-size", "2", "--image-size", "32")
# Bound of each command (the first push to 8 fresh nodes moves 8 x 1.6 GB).
COMMAND_TIMEOUT_S = 1800


@dataclass
class Step:
    """One command of one cycle: what ran, its exit code and how long it took."""

    cycle: int
    name: str
    exit_code: int
    seconds: float
    stdout: str = field(repr=False, default="")
    stderr: str = field(repr=False, default="")


@dataclass
class LoadReport:
    """Every step of every cycle, the run records, and the listings taken between cycles."""

    nodes: int
    steps: list[Step] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    snapshots: list[dict[str, list[str]]] = field(default_factory=list)

    def failed(self) -> list[Step]:
        """Steps that did not exit 0."""
        return [s for s in self.steps if s.exit_code != 0]

    def leaks(self) -> dict[str, tuple[list[str], list[str]]]:
        """What differs between the listing after the first cycle and after each later one:
        ``{what: (only before, only after)}``."""
        first, found = self.snapshots[1], {}
        for later in self.snapshots[2:]:
            for what in sorted(set(first) | set(later)):
                before, after = set(first.get(what, [])), set(later.get(what, []))
                if before != after:
                    found[what] = (sorted(before - after), sorted(after - before))
        return found


def _node_listing(node_container) -> dict[str, list[str]]:
    """What a node holds that a cycle could leave behind: its engine's containers, networks and
    volumes, and its processes (its containers' included: the node sees them)."""
    listing = {}
    for what, argv in (
        ("containers", ["docker", "ps", "-aq", "--no-trunc"]),
        ("networks", ["docker", "network", "ls", "-q", "--no-trunc"]),
        ("volumes", ["docker", "volume", "ls", "-q"]),
        ("processes", ["ps", "-eo", "comm="]),
    ):
        result = node_container.exec_run(argv)
        lines = result.output.decode(errors="replace").split()
        listing[what] = sorted(line for line in lines if line != "ps") if result.exit_code == 0 else ["?"]
    return listing


def _controller_children() -> list[str]:
    """Processes whose parent is this one (a command that left a child behind)."""
    me, found = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.append(stat.parent.name)
    return found


def snapshot(name: str, state: Path) -> dict[str, list[str]]:
    """Everything a cycle could leak, listed: the local engine's objects of the sandbox, each node's
    objects and processes, the state directory's files, this process's children."""
    client = docker.from_env(timeout=60)
    selector = {"label": f"{LABEL}={name}"}
    listing = {
        "local containers": sorted(c.name for c in client.containers.list(all=True, filters=selector)),
        "local networks": sorted(n.name for n in client.networks.list(filters=selector)),
        "local volumes": sorted(v.name for v in client.volumes.list(filters=selector)),
        # provision keeps its status capture per run (status/<UTC time>/, for check and inspect): by
        # design one more each cycle, so the time is left out; any other new file is a leak
        "state files": sorted(
            {
                _STATUS_STAMP.sub("status/<time>/", str(p.relative_to(state)))
                for p in state.rglob("*")
                if p.is_file()
            }
        ),
        "controller children": _controller_children(),
    }
    for container in client.containers.list(filters=selector):
        for what, lines in _node_listing(container).items():
            listing[f"{container.name.removeprefix(f'clusterctl-{name}-')} {what}"] = lines
    client.close()
    return listing


def _clusterctl(report: LoadReport, cycle: int, name: str, *args: str) -> Step:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "clusterctl", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    step = Step(cycle, name, proc.returncode, time.monotonic() - start, proc.stdout, proc.stderr)
    report.steps.append(step)
    return step


def _cycle(report: LoadReport, cycle: int, inventory: list[str], runs: Path, log) -> bool:
    """The commands of one cycle; False if one other than run failed (down ran anyway)."""
    for step, args in (
        ("provision", ["provision", *inventory, "--json"]),
        ("image build", ["image", "build", *inventory]),
        ("image push", ["image", "push", *inventory]),
        ("up", ["up", *inventory]),
        ("run", ["run", "resnet50", *inventory, *RUN_ARGS, "--runs-dir", str(runs), "--json"]),
        ("down", ["down", *inventory]),
    ):
        done = _clusterctl(report, cycle, step, *args)
        log(f"cycle {cycle} {step}: exit {done.exit_code} in {done.seconds:.1f} s")
        if done.exit_code != 0 and step != "run":
            log((done.stdout + done.stderr)[-3000:])
            if step != "down":
                _clusterctl(report, cycle, "down (cleanup)", "down", *inventory)
            return False
    return True


def run_cycles(state: Path, *, nodes: int = 8, cycles: int = 3, log=print) -> LoadReport:
    """Bring up an ``nodes``-node sandbox in ``state``, run ``cycles`` cycles, remove the sandbox.

    ``CLUSTERCTL_STATE_DIR`` is set to ``state`` for the whole call (and restored).
    """
    previous = os.environ.get("CLUSTERCTL_STATE_DIR")
    os.environ["CLUSTERCTL_STATE_DIR"] = str(state)
    name = unique_name("load")
    report = LoadReport(nodes)
    try:
        start = time.monotonic()
        status = sandbox_cluster.up(name, nodes, free_subnet())
        report.steps.append(Step(0, "sandbox up", 0, time.monotonic() - start))
        inventory = ["-i", str(status.files.inventory)]
        runs = state.parent / f"{state.name}-runs"
        report.snapshots.append(snapshot(name, state))
        for cycle in range(1, cycles + 1):
            completed = _cycle(report, cycle, inventory, runs, log)
            report.snapshots.append(snapshot(name, state))
            if not completed:
                break  # a command other than run failed: the next cycles would only repeat it
        run_dirs = sorted(d for d in runs.iterdir() if d.is_dir()) if runs.is_dir() else []
        report.runs = [json.loads((d / "result.json").read_text()) for d in run_dirs]
        report.commands = [(d / "command.txt").read_text() for d in run_dirs]
    finally:
        start = time.monotonic()
        sandbox_cluster.down(name)
        untag_cluster_images(name)
        report.steps.append(Step(0, "sandbox down", 0, time.monotonic() - start))
        if previous is None:
            os.environ.pop("CLUSTERCTL_STATE_DIR", None)
        else:
            os.environ["CLUSTERCTL_STATE_DIR"] = previous
    return report
