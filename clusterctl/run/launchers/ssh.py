"""The ssh launcher: mpirun in the primary node's benchmark container, its output streamed back.

mpirun reaches the other containers over their own sshd (the launch plan's ``plm_rsh_args``). The
exec itself kills the remote mpirun's whole session on Ctrl-C or at the deadline, so ``cancel`` has
nothing left to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.inventory import Inventory
from clusterctl.results.record import LauncherName
from clusterctl.run.launchers import Collected
from clusterctl.run.plan import LaunchPlan


@dataclass
class SshLaunch:
    """mpirun of ``plan`` in the primary's container (started when followed: the exec is the stream)."""

    inventory: Inventory
    plan: LaunchPlan
    lines: list[str] = field(default_factory=list)

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Run mpirun in the primary's container until it exits or ``deadline`` passes (then killed).

        Raises:
            StepError: the primary's container is not running (`clusterctl up`).
            ConnectError: the primary's Docker engine cannot be reached.
        """
        # Imported on use: only real runs need the Docker client.
        from clusterctl.containers import ExecTimedOut, exec_in_container

        def collect(line: str) -> None:
            self.lines.append(line)
            on_line(line)

        try:
            return exec_in_container(
                self.inventory,
                self.inventory.primary,
                self.plan.argv,
                env=None,
                timeout_s=max(deadline - time.monotonic(), 0.0),
                on_line=collect,
            )
        except ExecTimedOut as exc:
            self.lines.append(f"clusterctl: {exc}")
            return None

    def cancel(self) -> None:
        """Nothing to do: the exec killed mpirun's session before returning or re-raising."""

    def collect(self) -> Collected:
        """Every line mpirun printed (all ranks, tagged), and the mpirun command."""
        return Collected("\n".join(self.lines) + "\n", self.plan.shell_command())


class SshLauncher:
    """mpirun over SSH from the primary's container: the launcher of every inventory."""

    name: LauncherName = "ssh"
    observes_nodes = False

    def start(self, inventory: Inventory, plan: LaunchPlan) -> SshLaunch:
        """The launch of ``plan``; mpirun starts when it is followed."""
        return SshLaunch(inventory, plan)

    def describe(self, inventory: Inventory, plan: LaunchPlan) -> str:
        """The mpirun command, quoted for a shell."""
        del inventory
        return plan.shell_command()
