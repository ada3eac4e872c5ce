"""srun's lines about tasks that ended badly (``srun: error: node2: task 1: Exited with exit code 3``), in
the order srun printed them: the order it learned of them, so the first is the one that failed first
(with ``--kill-on-bad-exit`` srun ends the others after it). Read by the Slurm backend (the run's exit
code and closing line) and by the MPI failure classifier (the run's finding)."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

# srun's line for each task (or tasks, folded) that ended badly, on its stderr:
# ``srun: error: node2: task 1: Exited with exit code 3``, ``srun: error: node1: tasks 0-3: Killed``.
_TASK_FAILURE = re.compile(r"^srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[0-9][0-9,-]*): (?P<how>.+)$")
_EXITED = re.compile(r"Exited with exit code (\d+)")
# The signal descriptions srun prints (strsignal's, as a shell prints them), as 128 + the signal.
_SIGNAL_CODES = {signal.strsignal(s): 128 + s for s in signal.Signals if signal.strsignal(s)}


@dataclass(frozen=True)
class TaskFailure:
    """One of srun's lines about tasks that ended badly: where, which tasks, how, as an exit code."""

    host: str
    tasks: str
    how: str
    exit_code: int | None

    def describe(self) -> str:
        plural = "s" if any(c in self.tasks for c in ",-") else ""
        return f"task{plural} {self.tasks} on {self.host} ({self.how})"


def task_failures(lines: list[str]) -> list[TaskFailure]:
    """srun's task failure lines in ``lines``, in the order srun printed them (the order it learned of
    them); an exit code of 0 is no failure. A signal description srun did not get from this libc's
    ``strsignal`` gives no exit code."""
    found: list[TaskFailure] = []
    for line in lines:
        match = _TASK_FAILURE.match(line.strip())
        if match is None:
            continue
        how = match["how"].strip()
        exited = _EXITED.fullmatch(how)
        code = int(exited[1]) if exited else _SIGNAL_CODES.get(how.removesuffix(" (core dumped)"))
        if code != 0:
            found.append(TaskFailure(match["host"], match["tasks"], how, code))
    return found


def is_task_failure_line(line: str) -> bool:
    """Whether ``line`` is one of srun's task failure lines."""
    return _TASK_FAILURE.match(line.strip()) is not None
