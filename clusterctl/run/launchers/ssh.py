"""The ssh launcher: mpirun in the primary node's benchmark container, its output streamed back.

mpirun reaches the other containers over their own sshd (the launch plan's ``plm_rsh_args``). The
exec itself kills the remote mpirun's whole session on Ctrl-C or at the deadline, so ``cancel`` has
nothing left to do.

What the launch saw of its nodes is read over SSH on the plan's nodes: the topology snapshot
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
from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters
from clusterctl.inventory import Inventory, Node
from clusterctl.results.counter_reading import read_fabric_counters
from clusterctl.results.counters import CounterReader
from clusterctl.results.record import LauncherName
from clusterctl.run.launchers import Collected
from clusterctl.run.plan import LaunchPlan
from clusterctl.run.sampling import Samplers, start_samplers

SnapshotTaker = Callable[[Inventory, Sequence[Node]], dict[str, NodeBundle]]
"""Takes the topology snapshot of the given nodes now; bundles by node name."""
TelemetryStarter = Callable[[Inventory, Sequence[Node], float], Samplers]
"""Starts the telemetry sampler on the given nodes for at most that many seconds (plus a margin)."""


@dataclass
class SshLaunch:
    """mpirun of ``plan`` in the primary's container (started when followed: the exec is the stream).

    ``topology`` and ``before`` were read on ``nodes`` when the launch was started; the telemetry
    samplers start when it is followed.
    """

    inventory: Inventory
    plan: LaunchPlan
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
                self.plan.argv,
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
            self.plan.shell_command(),
            counters=(self.before, after),
            bundles={"topology": self.topology},
            telemetry=telemetry,
            telemetry_errors=self.samplers.errors if self.samplers is not None else {},
        )


class SshLauncher:
    """mpirun over SSH from the primary's container: the launcher of every inventory.

    ``read_counters`` and ``take_snapshot`` read the plan's nodes, ``start_telemetry`` starts their
    samplers (over SSH unless told otherwise).
    """

    name: LauncherName = "ssh"

    def __init__(
        self,
        read_counters: CounterReader = read_fabric_counters,
        take_snapshot: SnapshotTaker = collect,
        start_telemetry: TelemetryStarter = start_samplers,
    ) -> None:
        self.read_counters = read_counters
        self.take_snapshot = take_snapshot
        self.start_telemetry = start_telemetry

    def start(self, inventory: Inventory, plan: LaunchPlan) -> SshLaunch:
        """The launch of ``plan`` with its nodes' snapshot and counters read now; mpirun starts when
        it is followed."""
        nodes = [inventory.node(h.node) for h in plan.hosts]
        topology = self.take_snapshot(inventory, nodes)
        before = self.read_counters(inventory, nodes)
        return SshLaunch(inventory, plan, nodes, self.read_counters, topology, before, self.start_telemetry)

    def describe(self, inventory: Inventory, plan: LaunchPlan) -> str:
        """The mpirun command, quoted for a shell."""
        del inventory
        return plan.shell_command()
