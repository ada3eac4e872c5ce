"""Open MPI / PRRTE failure text: what kind of failure it is, on which hosts, and a one-line summary.

Categories, checked in this order (the first match wins, most specific cause first):
ssh-connect-failed, daemon-lost (a node, its container or the network went away mid-run),
daemons-failed-to-start, not-enough-slots, rank-crashed, nonzero-exit,
openib-no-active-ports (a warning Open MPI prints before running anyway), unknown.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from clusterctl.diagnostics.model import Parsed, split_tag, to_int
from clusterctl.diagnostics.parsers.srun_tasks import TaskFailure, is_task_failure_line, task_failures

MpiCategory = Literal[
    "ssh-connect-failed",
    "daemon-lost",
    "not-enough-slots",
    "daemons-failed-to-start",
    "rank-crashed",
    "nonzero-exit",
    "openib-no-active-ports",
    "unknown",
]

_SSH = re.compile(
    r"ssh: connect to host|ssh: Could not resolve|Permission denied \(publickey|"
    r"Host key verification failed|Connection refused|ssh_exchange_identification|kex_exchange"
)
_DAEMONS = re.compile(
    r"(?:ORTE|PRRTE|PRTE) was unable to reliably start|orted: command not found|prted: command not found"
)
_LOST = re.compile(r"(?:ORTE|PRRTE|PRTE) has lost communication with a remote daemon")
_REMOTE_DAEMON = re.compile(r"Remote daemon\s*:.*? on node ([\w.-]+)")
# ssh's own line when the node ends an established session: the node or its container went away.
_CLOSED = re.compile(r"Connection to ([\w.-]+) closed by remote host")
_SLOTS = re.compile(r"There are not enough slots available in the system to satisfy the (\d+)")
_OPENIB = re.compile(r"there are no active ports detected")
_CRASH = re.compile(
    r"exited on signal (\d+)(?: \(([^)]*)\))?|Process received signal|Signal: (\w+) \((\d+)\)"
)
_NONZERO = re.compile(r"exited with non-zero status|Primary job\s+terminated normally, but \d+ process")
_RANK = re.compile(r"process rank (\d+)")
_EXIT = re.compile(r"Exit code:\s*(\d+)")
_HOST_PATTERNS = (
    re.compile(r"^\[([\w.-]+):\d+\]"),  # [host:pid] ...
    re.compile(r"on node ([\w.-]+)"),
    re.compile(r"Local host:\s*([\w.-]+)"),
    re.compile(r"connect to host ([\w.-]+)"),
)
_RECOGNISED = re.compile(r"^-{10,}$|NCCL failure|Test failure|terminate called|what\(\):|\*\*\*|Signal code|"
                         r"total processes killed|PRRTE ERROR|ORTE_ERROR|Process name:|closed by remote host")  # fmt: skip


class MpiError(Parsed):
    """A classified MPI launcher failure."""

    category: MpiCategory = Field("unknown", description="What kind of failure this is.")
    summary: str = Field("", description="One line saying what happened.")
    hosts: list[str] = Field(default_factory=list, description="Hosts named in the text.")
    lost_host: str | None = Field(
        None, description="The host whose daemon mpirun lost, or whose end closed mpirun's SSH session."
    )
    rank: int | None = Field(None, description="The failing rank, when named.")
    exit_code: int | None = Field(None, description="`Exit code:` of the first failing process.")
    signal: int | None = Field(None, description="Signal that killed a rank.")
    requested_slots: int | None = Field(None, description="Slots requested (not-enough-slots).")
    errors: list[str] = Field(default_factory=list, description="Application failure lines (NCCL, CUDA).")


def parse_mpi_error(text: str) -> MpiError:
    """Classify Open MPI / PRRTE failure output.

    Args:
        text: mpirun's stderr (or the whole log).

    Returns:
        Category, summary and details. Lines inside the launcher's dashed help blocks are read as a
        whole; other lines no pattern knows go to ``unparsed_lines``.
    """
    result = MpiError()
    lines = [split_tag(raw)[1] for raw in text.splitlines()]
    joined = "\n".join(lines)
    in_block = False
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"-{10,}", stripped):
            in_block = not in_block
            continue
        if not stripped:
            continue
        _read_details(result, stripped)
        known = (
            _RECOGNISED.search(stripped)
            or _any_category(stripped)
            or _EXIT.search(stripped)
            or is_task_failure_line(stripped)
        )
        if not (in_block or known):
            result.unparsed_lines.append(line)
    failures = task_failures(lines)
    if failures:
        _read_first_task(result, failures[0])
    result.category, result.summary = _classify(joined, result, failures)
    return result


def _read_first_task(result: MpiError, first: TaskFailure) -> None:
    """The details of srun's first failed task: its host, its task as the rank, its code or signal."""
    if first.host not in result.hosts:
        result.hosts.insert(0, first.host)
    if result.rank is None and first.tasks.isdigit():
        result.rank = int(first.tasks)
    if first.how.startswith("Exited"):
        result.exit_code = result.exit_code if result.exit_code is not None else first.exit_code
    elif first.exit_code is not None and result.signal is None:
        result.signal = first.exit_code - 128


def _read_details(result: MpiError, line: str) -> None:
    for pattern in _HOST_PATTERNS:
        if (m := pattern.search(line)) and m.group(1) not in result.hosts:
            result.hosts.append(m.group(1))
    if (m := _REMOTE_DAEMON.search(line) or _CLOSED.search(line)) and result.lost_host is None:
        result.lost_host = m.group(1)
    if (m := _RANK.search(line)) and result.rank is None:
        result.rank = to_int(m.group(1))
    if (m := _EXIT.search(line)) and result.exit_code is None:
        result.exit_code = to_int(m.group(1))
    if (m := _SLOTS.search(line)) is not None:
        result.requested_slots = to_int(m.group(1))
    if m := _CRASH.search(line):
        number = m.group(1) or m.group(4)
        result.signal = result.signal or (to_int(number) if number else None)
    if re.search(r"NCCL failure|CUDA failure|what\(\):", line) and line not in result.errors:
        result.errors.append(line)


def _any_category(line: str) -> bool:
    return any(p.search(line) for p in (_SSH, _LOST, _DAEMONS, _SLOTS, _OPENIB, _CRASH, _NONZERO))


def _classify(text: str, result: MpiError, failures: list[TaskFailure]) -> tuple[MpiCategory, str]:
    hosts = ", ".join(result.hosts) or "unknown host"
    if _SSH.search(text):
        return "ssh-connect-failed", f"mpirun could not reach a node over SSH ({hosts})"
    if _LOST.search(text):
        return (
            "daemon-lost",
            f"mpirun lost its daemon on {result.lost_host or hosts}: that node, its container or the "
            "network went away while the job ran",
        )
    if _DAEMONS.search(text) and result.lost_host:  # the node went away while its daemon started
        return (
            "daemons-failed-to-start",
            f"mpirun could not start its daemon on {result.lost_host}: that node closed the SSH session "
            "(the node or its container went away)",
        )
    if _DAEMONS.search(text):
        return (
            "daemons-failed-to-start",
            "mpirun could not start its daemons (orted/prted) on the other nodes",
        )
    if _SLOTS.search(text):
        return "not-enough-slots", f"{result.requested_slots} slots requested, more than the hosts offer"
    if failures:  # srun's: the first task it learned of is the cause; the others it ended after
        first = failures[0]
        after = "; srun ended the other tasks after it" if len(failures) > 1 else ""
        category: MpiCategory = "nonzero-exit" if first.how.startswith("Exited") else "rank-crashed"
        return category, f"{first.describe()} failed first{after}"
    if _CRASH.search(text):
        rank = f"rank {result.rank}" if result.rank is not None else "a rank"
        signal = f" on signal {result.signal}" if result.signal else ""
        return "rank-crashed", f"{rank} crashed{signal} ({hosts})"
    if _NONZERO.search(text):
        code = f" with exit code {result.exit_code}" if result.exit_code is not None else ""
        return "nonzero-exit", f"a rank exited{code}; mpirun aborted the job"
    if _OPENIB.search(text):
        return "openib-no-active-ports", f"the openib BTL found no active IB port ({hosts}); it was skipped"
    return "unknown", "no known MPI failure pattern found"
