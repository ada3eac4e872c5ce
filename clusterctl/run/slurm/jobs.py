"""Slurm job states: parsers of ``scontrol show job``, ``squeue`` and ``sacct`` output, and the
mapping of a finished job's state to an exit code and a reason. Pure.

``scontrol show job`` (with or without ``-o``) is a list of ``Key=Value`` tokens; ``sacct
--parsable2`` is ``|``-separated with a header line; ``squeue -h -o '%T|%r'`` is what the launcher
asks for. Parsers never raise: text they cannot read gives None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.diagnostics.parsers.srun_tasks import task_failures
from clusterctl.results.record import TIMEOUT_EXIT_CODE

# States in which a job may still run or is still being cleaned up (squeue's default set).
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
     "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
)  # fmt: skip
# A job killed for memory: what a shell reports for a process the kernel's OOM killer ended (128 + 9).
OOM_EXIT_CODE = 137
# Signals are 1-64; Slurm's ExitCode=0:125 on OUT_OF_MEMORY is no signal.
MAX_SIGNAL = 64
_TOKEN = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=(\S*)")


@dataclass(frozen=True)
class JobStatus:
    """A job's state as Slurm reports it: ``exit_code``/``signal`` from ``ExitCode=code:signal``."""

    job_id: str
    state: str
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None

    @property
    def active(self) -> bool:
        """The job is pending, running or still completing (its Epilog included)."""
        return self.state in ACTIVE_STATES


def _exit_pair(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    code, _, signal = text.partition(":")
    return (int(code) if code.isdigit() else None), (int(signal) if signal.isdigit() else None)


def parse_scontrol_job(text: str) -> JobStatus | None:
    """The job in ``scontrol show job [-o] ID`` output (the first one); None when there is none."""
    fields: dict[str, str] = {}
    for key, value in _TOKEN.findall(text):
        fields.setdefault(key, value)
    if "JobId" not in fields or "JobState" not in fields:
        return None
    reason = fields.get("Reason")
    code, signal = _exit_pair(fields.get("ExitCode"))
    return JobStatus(
        fields["JobId"], fields["JobState"], None if reason in (None, "None") else reason, code, signal
    )


def parse_sacct(text: str, job_id: str) -> JobStatus | None:
    """The allocation line of ``job_id`` in ``sacct --parsable2`` output with its header line.

    ``State`` may read ``CANCELLED by 0``: the first word is the state.
    """
    lines = [line.rstrip("|") for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    header = lines[0].split("|")
    if "JobID" not in header or "State" not in header:
        return None
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        if row.get("JobID") == job_id and row.get("State"):
            code, signal = _exit_pair(row.get("ExitCode"))
            return JobStatus(job_id, row["State"].split()[0], row.get("Reason") or None, code, signal)
    return None


def parse_squeue(text: str, job_id: str) -> JobStatus | None:
    """``squeue -h -j ID -o '%T|%r'`` output: the job's state and reason; None when it left the queue."""
    for line in text.splitlines():
        state, _, reason = line.strip().partition("|")
        if state:
            return JobStatus(job_id, state, reason or None)
    return None


@dataclass(frozen=True)
class JobOutcome:
    """What a finished job means for the run: the exit code recorded and a one-line reason."""

    exit_code: int
    message: str


def job_outcome(status: JobStatus) -> JobOutcome:
    """The exit code and reason of a finished job (``status.active`` is False).

    COMPLETED: the script's code. FAILED: the script's code (1 when Slurm recorded 0). TIMEOUT: 124.
    OUT_OF_MEMORY: 137. CANCELLED, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE...: 128 + the signal when
    Slurm recorded one, else 1. The message names the job, its state, its reason and ExitCode.
    """
    code, signal = status.exit_code, status.signal
    where = f"slurm job {status.job_id} {status.state}"
    details = [f"reason {status.reason}"] if status.reason else []
    if code is not None:
        details.append(f"ExitCode {code}:{signal or 0}")
    message = where + (f" ({', '.join(details)})" if details else "")
    if status.state == "COMPLETED":
        return JobOutcome(code or 0, message)
    if status.state == "TIMEOUT":
        return JobOutcome(TIMEOUT_EXIT_CODE, message)
    if status.state == "FAILED" and code:
        return JobOutcome(code, message)
    if status.state == "OUT_OF_MEMORY":
        return JobOutcome(OOM_EXIT_CODE, message)
    if signal and signal <= MAX_SIGNAL:
        return JobOutcome(128 + signal, message)
    return JobOutcome(code or 1, message)


def blame_first_task(outcome: JobOutcome, status: JobStatus, lines: list[str]) -> JobOutcome:
    """``outcome`` of a FAILED job, with the first task to fail named, and its exit code the run's.

    srun exits with the highest of its tasks' codes, a killed task's counted as 128 + the signal. With
    ``--kill-on-bad-exit`` srun ends the other tasks once one fails, so a task still running then
    (ended by SIGTERM: 143) outranks the one that failed (exit 3); which one wins is a race. The first
    failure srun printed is the cause (it kills only after it learned of it), so when the job's code is
    a killed task's (above 128), the first failure's code is the run's, as mpirun gives the first failed
    process's. A job's own code under 128 (the script's, e.g. the image check's) stays. Other states,
    or no such line: ``outcome`` unchanged.
    """
    failures = task_failures(lines) if status.state == "FAILED" else []
    if not failures:
        return outcome
    first = failures[0]
    code = outcome.exit_code
    if outcome.exit_code > 128 and first.exit_code is not None:
        code = first.exit_code
    message = f"{outcome.message}; the first to fail: {first.describe()}"
    if code != outcome.exit_code:
        message += f", exit code {code} (srun's {outcome.exit_code} is a task it ended after)"
    return JobOutcome(code, message)


def parse_mpi_list(text: str) -> list[str]:
    """The plugin names in ``srun --mpi=list`` output.

    23.02 and later (and 22.05): ``MPI plugin types are...`` then one tab-indented name per line, and
    ``specific pmix plugin versions available: pmix_v4``. Before 23.02 every line is prefixed
    ``srun: `` (``srun: MPI types are...``, ``srun: pmix``), and the oldest releases name a plugin
    ``mpi/pmi2``: both forms give the bare name.
    """
    names: list[str] = []
    for line in text.splitlines():
        stripped = line.strip().removeprefix("srun:").strip()
        if stripped.startswith("specific ") and ":" in stripped:
            names += [n.strip() for n in stripped.split(":", 1)[1].split(",") if n.strip()]
        elif stripped and " " not in stripped and not stripped.endswith(":"):
            names.append(stripped.removeprefix("mpi/"))
    return names


# Pending reasons no wait cures (Slurm's job reason codes): the request itself does not fit the
# partition, the account or the nodes; each with what to change.
HOPELESS_REASONS = {
    "PartitionConfig": "the request does not fit the partition's configuration (more tasks per node than a "
    "node has CPUs, GPUs a partition lacks, an account it does not allow, or no node of it up)",
    "PartitionNodeLimit": "the job's node count is outside the partition's limits (or its nodes are down)",
    "PartitionTimeLimit": "the job's time limit exceeds the partition's",
    "BadConstraints": "no node has the constraints asked for",
    "AccountNotAllowed": "the partition does not allow the job's account",
    "QOSNotAllowed": "the partition does not allow the job's QOS",
    "InvalidAccount": "the job's account is invalid",
    "InvalidQOS": "the job's QOS is invalid",
}
_FIX = (
    "Fix: ask for what the partition has (`sinfo -N -l` and `scontrol show partition` on the login node): "
    "fewer --ranks-per-node or --nodes, or the slurm block's partition, account, qos, time_limit or "
    "constraint."
)
# What sbatch says when it refuses a request no node can satisfy.
_UNSATISFIABLE = ("Requested node configuration is not available", "Node count specification invalid")


def hopeless_pending(status: JobStatus) -> str | None:
    """Why ``status`` can never start, with the fix; None when it is not pending or may still start."""
    if status.state != "PENDING" or status.reason not in HOPELESS_REASONS:
        return None
    return f"PENDING with reason {status.reason}: {HOPELESS_REASONS[status.reason]}. {_FIX}"


def refusal_fix(sbatch_stderr: str) -> str:
    """The fix for an sbatch refusal no resubmission of the same request cures; empty for other refusals."""
    return f" {_FIX}" if any(words in sbatch_stderr for words in _UNSATISFIABLE) else ""
