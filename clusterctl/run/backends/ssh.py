"""The ssh backend: the launcher's command (mpirun) in the primary node's benchmark container, its
output streamed back.

mpirun reaches the other containers over their own sshd (``clusterctl.run.launchers.mpirun``). The
exec itself kills the remote mpirun's whole session on Ctrl-C or at the deadline, so ``cancel`` has
nothing left to do. Before a run with a rendezvous, ``prepare`` picks its port free on rank 0's node
(``clusterctl.run.rendezvous``).

What the launch saw of its nodes is read over SSH on the job's nodes: the topology snapshot
(``check topology``'s collectors) and the fabric counters right before the run (``start``), the
counters again right after it (``collect``). The node telemetry sampler (``clusterctl.run.sampling``)
runs on every node from right before mpirun starts until ``cancel`` or ``collect`` stops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clusterctl.diagnostics.bundle import NodeBundle
from clusterctl.diagnostics.collect import collect
from clusterctl.diagnostics.counter_reading import read_fabric_counters
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters
from clusterctl.inventory import Inventory, Node
from clusterctl.results.counters import CounterReader
from clusterctl.results.record import LauncherName
from clusterctl.run.backends import Collected, Description
from clusterctl.run.launchers import Launcher
from clusterctl.run.launchers.mpirun import Mpirun, shell_command
from clusterctl.run.plan import with_rendezvous_port
from clusterctl.run.rendezvous import choose_port
from clusterctl.run.sampling import Samplers, start_samplers
from clusterctl.workloads.image_caps import JobImage, built_job_image
from clusterctl.workloads.job import Job

SnapshotTaker = Callable[[Inventory, Sequence[Node]], dict[str, NodeBundle]]
"""Takes the topology snapshot of the given nodes now; bundles by node name."""
TelemetryStarter = Callable[[Inventory, Sequence[Node], float], Samplers]
"""Starts the telemetry sampler on the given nodes for at most that many seconds (plus a margin)."""


@dataclass
class SshLaunch:
    """``command`` (mpirun) in the primary's container (started when followed: the exec is the stream).

    ``topology`` and ``before`` were read on ``nodes`` when the launch was started; the telemetry
    samplers start when it is followed.
    """

    inventory: Inventory
    command: list[str]
    nodes: list[Node]
    read_counters: CounterReader
    topology: dict[str, NodeBundle]
    before: dict[str, NodeCounters]
    start_telemetry: TelemetryStarter = start_samplers
    samplers: Samplers | None = None
    lines: list[str] = field(default_factory=list)

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Run mpirun in the primary's container until it exits or ``deadline`` passes (then killed).

        Raises:
            StepError: the primary's container is not running (`clusterctl up`).
            ConnectError: the primary's Docker engine cannot be reached.
        """
        # Imported on use: only real runs need the Docker client.
        from clusterctl.containers.plan import container_name
        from clusterctl.hosts.container_exec import ExecTimedOut, exec_in_container

        def collect(line: str) -> None:
            self.lines.append(line)
            on_line(line)

        self.samplers = self.start_telemetry(
            self.inventory, self.nodes, max(deadline - time.monotonic(), 0.0)
        )
        try:
            return exec_in_container(
                self.inventory,
                self.inventory.primary,
                self.command,
                container=container_name(self.inventory, self.inventory.primary),
                env=None,
                timeout_s=max(deadline - time.monotonic(), 0.0),
                on_line=collect,
            )
        except ExecTimedOut as exc:
            self.lines.append(f"clusterctl: {exc}")
            return None

    def cancel(self) -> None:
        """Stop the telemetry samplers: the exec killed mpirun's session before returning or re-raising."""
        if self.samplers is not None:
            self.samplers.stop()

    def collect(self) -> Collected:
        """Every line mpirun printed (all ranks, tagged), the mpirun command, the counters before and
        now (read over SSH), the snapshot taken before the run, and each node's telemetry (its
        sampler stopped first)."""
        telemetry = self.samplers.stop() if self.samplers is not None else None
        after = self.read_counters(self.inventory, self.nodes)
        return Collected(
            "\n".join(self.lines) + "\n",
            shell_command(self.command),
            counters=(self.before, after),
            bundles={"topology": self.topology},
            telemetry=telemetry,
            telemetry_errors=self.samplers.errors if self.samplers is not None else {},
        )


class SshBackend:
    """The launcher's command over SSH from the primary's container: the backend of every inventory.

    ``launcher`` renders the job (mpirun unless told otherwise); ``read_counters`` and ``take_snapshot``
    read the job's nodes, ``start_telemetry`` starts their samplers (over SSH unless told otherwise).
    """

    name: LauncherName = "ssh"
    starter = "mpirun"

    def __init__(
        self,
        read_counters: CounterReader = read_fabric_counters,
        take_snapshot: SnapshotTaker = collect,
        start_telemetry: TelemetryStarter = start_samplers,
        launcher: Launcher | None = None,
    ) -> None:
        self.read_counters = read_counters
        self.take_snapshot = take_snapshot
        self.start_telemetry = start_telemetry
        self.launcher: Launcher = launcher or Mpirun()

    def job_image(self, inventory: Inventory) -> JobImage:
        """The image `clusterctl image build` makes: the benchmark containers run it."""
        return built_job_image(inventory)

    def prepare(self, inventory: Inventory, job: Job, run_id: str) -> Job:
        """``job`` with the first of the run's rendezvous ports free on rank 0's node (``choose_port``)."""
        if job.rendezvous_port is None:
            return job
        return with_rendezvous_port(job, choose_port(inventory, job, run_id))

    def on_exactly(self, inventory: Inventory) -> Inventory:
        """``inventory`` as it is: its nodes are where the job's mpirun starts ranks."""
        return inventory

    def start(self, inventory: Inventory, job: Job) -> SshLaunch:
        """The launch of ``job`` with its nodes' snapshot and counters read now; the command starts when
        it is followed."""
        nodes = [inventory.node(h.node) for h in job.hosts]
        topology = self.take_snapshot(inventory, nodes)
        before = self.read_counters(inventory, nodes)
        command = self.launcher.command(inventory, job)
        return SshLaunch(
            inventory, command, nodes, self.read_counters, topology, before, self.start_telemetry
        )

    def describe(self, inventory: Inventory, job: Job) -> Description:
        """The command, quoted for a shell; in --json its argv, the job's variables and the command."""
        argv = self.launcher.command(inventory, job)
        command = shell_command(argv)
        return Description(text=command + "\n", fields={"argv": argv, "env": job.env, "command": command})
