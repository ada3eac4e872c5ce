"""A command for a node and what it did there, as values: the SSH connector returns them, and pure
code (a Slurm job's snapshot read back, a collector's output cut into a bundle) builds them without
loading SSH."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Command = str | Sequence[str]
"""A command line: one shell string, or an argv quoted for the shell when it is run."""


@dataclass
class CommandResult:
    """What one command did on one node. ``error`` is set when it could not run or finish."""

    node: str
    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    error: str | None = None
    unreachable: bool = False

    @property
    def ok(self) -> bool:
        """The command ran and exited 0."""
        return self.error is None and self.exit_code == 0
