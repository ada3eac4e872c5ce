"""Launchers for tests: ``LocalMpirun`` runs a plan's payload under the host's own Open MPI (no
containers); ``Ended`` runs nothing, every launch ends at once with what the test gives.

The plan's rank command is kept as built (so the workload's argv is what runs); only the mpirun
flags change to a single-host launch, the payload path points at this checkout, and the ranks run
this environment's own interpreter (``sys.executable``: the one with torch and horovod), not
whatever ``python`` comes first on PATH.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.diagnostics.bundle import NodeBundle
from clusterctl.image.render import CONTAINER_PAYLOAD_DIR
from clusterctl.inventory import Inventory, validate_document
from clusterctl.results.counters import CounterReadings
from clusterctl.results.record import LauncherName
from clusterctl.run.backends import Collected, Description
from clusterctl.run.backends.ssh import SshBackend
from clusterctl.run.launchers.mpirun import Mpirun, shell_command
from clusterctl.run.plan import rendezvous_ports, with_rendezvous_port
from clusterctl.workloads.image_caps import JobImage, built_job_image
from clusterctl.workloads.job import Job

ROOT = Path(__file__).resolve().parents[2]
LOCAL_PAYLOAD_DIR = ROOT / "clusterctl" / "payload"


# A gpt run of a few seconds on CPU ranks: the smallest model, short sequences, two steps.
TINY_GPT: dict[str, Any] = {
    "model_size": "tiny",
    "seq_len": 32,
    "batch_size": 2,
    "steps": 2,
    "warmup_steps": 1,
    "display_every": 1,
}


def free_port() -> int:
    """A TCP port free on this host's loopback now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def local_inventory() -> Inventory:
    """Two CPU "nodes" on this host's loopback (127.0.0.1 and .2) for ``LocalMpirun``."""
    document = {
        "cluster": {"name": "local", "defaults": {"gpus": {"count": 0}, "fabric": {"interface": "lo"}}},
        "nodes": [
            {"name": "node1", "address": "127.0.0.1", "role": "primary"},
            {"name": "node2", "address": "127.0.0.2"},
        ],
    }
    return validate_document(document, Path("local.yml"))


@dataclass
class LocalMpirunLaunch:
    """``plan``'s rank command under ``mpirun -np <world size> --oversubscribe`` on this host."""

    plan: Job
    command: str
    output: str = ""

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Run the ranks to their end (subprocess.TimeoutExpired past ``deadline``); their exit code."""
        rank_argv = list(self.plan.rank_argv)
        rank_argv[0] = sys.executable
        rank_argv[1] = str(LOCAL_PAYLOAD_DIR / rank_argv[1].removeprefix(f"{CONTAINER_PAYLOAD_DIR}/"))
        argv = [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "--tag-output",
            "-np",
            str(self.plan.world_size),
        ]
        rendezvous = {k: v for k, v in self.plan.env.items() if k.startswith("MASTER_")}
        if "MASTER_PORT" in rendezvous:
            # The conductor's port check runs over SSH, which does not reach this host's loopback, so its
            # pick is the run id's first candidate: the same for two runs started in the same second (the
            # unit session's and another's). Other payload runs share this machine: this launch takes a free port.
            rendezvous["MASTER_PORT"] = str(free_port())
        env = {**os.environ, "OMP_NUM_THREADS": "1", **rendezvous}
        proc = subprocess.run(
            [*argv, *rank_argv],
            capture_output=True,
            text=True,
            timeout=max(deadline - time.monotonic(), 0.0),
            env=env,
            check=False,
        )
        self.output = proc.stdout + proc.stderr
        for line in self.output.splitlines():
            on_line(line)
        return proc.returncode

    def cancel(self) -> None:
        """Nothing to do: the ranks ended before ``follow`` returned or raised."""

    def collect(self) -> Collected:
        """What the ranks printed, and the plan's command; no counters, no snapshot."""
        return Collected(self.output, self.command)


class Described:
    """What the ssh backend says for a dry run (the job's mpirun command), and the run's first
    rendezvous port (the ssh backend's check over SSH does not reach this host's loopback)."""

    starter = "mpirun"

    def describe(self, inventory: Inventory, plan: Job) -> Description:
        """The job's mpirun command, as the ssh backend describes it."""
        return SshBackend().describe(inventory, plan)

    def job_image(self, inventory: Inventory) -> JobImage:
        """The ssh backend's: the built image."""
        return built_job_image(inventory)

    def prepare(self, inventory: Inventory, plan: Job, run_id: str) -> Job:
        """``plan`` with the run's first rendezvous port."""
        del inventory
        return with_rendezvous_port(plan, rendezvous_ports(run_id)[0])

    def on_exactly(self, inventory: Inventory) -> Inventory:
        """As the ssh backend: the inventory's nodes are where the ranks run."""
        return SshBackend().on_exactly(inventory)


class LocalMpirun(Described):
    """The ssh backend's stand-in: the job's ranks under this host's own Open MPI."""

    name: LauncherName = "ssh"

    def start(self, inventory: Inventory, plan: Job) -> LocalMpirunLaunch:
        """The launch of ``plan``; the ranks start when it is followed."""
        return LocalMpirunLaunch(plan, shell_command(Mpirun().command(inventory, plan)))


@dataclass
class EndedLaunch:
    """A launch that has already ended: ``follow`` hands its output's lines over and gives its exit code."""

    exit_code: int
    collected: Collected

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Every line of the output, then the exit code."""
        del deadline
        for line in self.collected.output.splitlines():
            on_line(line)
        return self.exit_code

    def cancel(self) -> None:
        """Nothing runs."""

    def collect(self) -> Collected:
        """What the test gave."""
        return self.collected


@dataclass
class Ended(Described):
    """A launcher whose every launch ends at once with ``exit_code`` and ``output``, and collects
    ``command`` (empty: the plan's), ``counters``, ``bundles`` and ``telemetry``."""

    exit_code: int
    output: str = ""
    name: LauncherName = "ssh"
    command: str = ""
    counters: CounterReadings | None = None
    bundles: Mapping[str, Mapping[str, NodeBundle]] = field(default_factory=dict)
    telemetry: Mapping[str, str] | None = None
    telemetry_errors: Mapping[str, str] = field(default_factory=dict)

    def start(self, inventory: Inventory, plan: Job) -> EndedLaunch:
        """A launch that has already ended."""
        del inventory
        collected = Collected(
            self.output, self.command, self.counters, self.bundles, self.telemetry, self.telemetry_errors
        )
        return EndedLaunch(self.exit_code, collected)
