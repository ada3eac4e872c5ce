"""The slurm backend: sbatch of the rendered batch script on the login node, then poll, stream,
cancel and collect over SSH (the login node's host key verified like any node's). The script's step,
which starts the ranks, is its launcher's (srun unless told otherwise; ``clusterctl.run.launchers``).

Before the real submit, ``check_before_submit`` asks the login node whether pyxis is loaded (the
pyxis runtime) and whether ``sbatch --test-only`` accepts the request.

The job's output file is read from the login node as it grows (the run directory is on storage the
batch host shares with it). Polls back off from ``POLL_FIRST_S`` to ``POLL_MAX_S``; a job PENDING
past ``slurm.pending_limit_s`` is cancelled with its reason; one pending for a reason no wait can
cure (``clusterctl.run.slurm.jobs.hopeless_pending``) is cancelled at once, with the cause and the fix. ``cancel`` runs ``scancel`` and waits,
bounded, until the job has left ``squeue`` (its Epilog has run by then). ``collect`` reads back
the snapshots the job took on the nodes it got, before and after the run
(``clusterctl.run.slurm.snapshots``): the run directory's topology and the fabric counters the proof by
counters judges, from inside the allocation, never read over SSH on the inventory's nodes.

What the launch reads from the login node (the job's state, its output file, its snapshot files) and the
scancel it asks for go through ``LoginReaders``, one command each on the login node by default
(``ssh_login_readers``): the seam the ssh backend has for its counter, snapshot and telemetry readers.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import fabric

from clusterctl.errors import ConnectError, InputError, RunFailed
from clusterctl.hosts.command import CommandResult
from clusterctl.hosts.sftp import write_file
from clusterctl.hosts.ssh import connect, run
from clusterctl.inventory import FabricSpec, Inventory, Node, SlurmSpec
from clusterctl.nodesets import fold
from clusterctl.paths import payload_files
from clusterctl.results.record import LauncherName
from clusterctl.run.backends import Collected, Description
from clusterctl.run.launchers import StepLauncher
from clusterctl.run.plan import rendezvous_ports, with_rendezvous_port
from clusterctl.run.slurm.jobs import (
    JobStatus,
    blame_first_task,
    hopeless_pending,
    job_outcome,
    parse_mpi_list,
    parse_sacct,
    parse_scontrol_job,
    parse_squeue,
    refusal_fix,
)
from clusterctl.run.slurm.script import PAYLOAD_SUBDIR, BatchJob, login_node, plan_batch, slurm_block
from clusterctl.run.slurm.snapshots import job_files_command, read_job_snapshots, split_job_files
from clusterctl.workloads.image_caps import JobImage, slurm_job_image
from clusterctl.workloads.job import Job

POLL_FIRST_S = 1.0
POLL_MAX_S = 10.0
# One command on the login node (sbatch, scontrol, a read of the output file).
COMMAND_TIMEOUT_S = 60.0
# How long scancel may take to get the job out of the queue (its tasks killed, its Epilog run).
CANCEL_DEADLINE_S = 120.0


@dataclass(frozen=True)
class LoginReaders:
    """What a launch reads from the login node and asks of it, by job id (or path): each returns what
    the command printed, None where the command failed; each raises ConnectError when the login node
    cannot be reached."""

    job_state: Callable[[str], str | None]
    """`scontrol show job -o ID`: the controller's record of the job."""
    accounting: Callable[[str], str | None]
    """`sacct -X -P -j ID -o JobID,State,ExitCode,Reason`: the record once the controller forgot the job."""
    queue: Callable[[str], str | None]
    """`squeue -h -j ID -o %T|%r`: the job's state while it is queued or running."""
    output: Callable[[str, int], str]
    """The job's output file from a byte offset (1-based, as ``tail -c +N``); "" when it is not there yet."""
    job_files: Callable[[str], str | None]
    """The job directory's snapshot files, framed by ``job_files_command``."""
    cancel: Callable[[str], None]
    """`scancel ID`."""


def ssh_login_readers(conn: fabric.Connection, node: Node) -> LoginReaders:
    """The readers as commands on the login node ``node`` over ``conn``."""

    def command(argv: list[str]) -> CommandResult:
        result = run(conn, node, argv, timeout_s=COMMAND_TIMEOUT_S)
        if result.unreachable:
            raise ConnectError(f"slurm login node {node.address}: {result.error}")
        return result

    def printed(argv: list[str]) -> str | None:
        result = command(argv)
        return result.stdout if result.ok else None

    def output(path: str, offset: int) -> str:
        return command(
            ["sh", "-c", 'tail -c +"$1" -- "$2" 2>/dev/null || true', "read", str(offset), path]
        ).stdout

    def cancel(job_id: str) -> None:
        command(["scancel", job_id])  # whether it took is read from squeue afterwards

    return LoginReaders(
        job_state=lambda job_id: printed(["scontrol", "show", "job", "-o", job_id]),
        accounting=lambda job_id: printed(
            ["sacct", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode,Reason"]
        ),
        queue=lambda job_id: printed(["squeue", "-h", "-j", job_id, "-o", "%T|%r"]),
        output=output,
        job_files=lambda directory: printed(job_files_command(directory)),
        cancel=cancel,
    )


LoginReadersFactory = Callable[[fabric.Connection, Node], LoginReaders]
"""Builds the readers of the login node reached over a connection (``ssh_login_readers`` by default)."""


@dataclass
class SlurmLaunch:
    """One submitted batch job, followed over an open connection to the login node."""

    slurm: SlurmSpec
    node: Node
    conn: fabric.Connection
    job: BatchJob
    job_id: str
    fabric: FabricSpec
    login: LoginReaders
    lines: list[str] = field(default_factory=list)
    _offset: int = 0
    _partial: bytes = b""
    _done: bool = False
    _on_line: Callable[[str], None] = field(default=lambda line: None)

    def _emit(self, line: str, on_line: Callable[[str], None]) -> None:
        self.lines.append(line)
        on_line(line)

    def _read_output(self, on_line: Callable[[str], None], final: bool = False) -> None:
        """Pass on the complete lines the job's output file gained since the last read."""
        data = self.login.output(self.job.output, self._offset + 1).encode()
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            self._emit(raw.decode(errors="replace").rstrip("\r"), on_line)
        if final and self._partial:
            self._emit(self._partial.decode(errors="replace"), on_line)
            self._partial = b""

    def status(self) -> JobStatus | None:
        """The job's state from the controller, else accounting; None when neither knows it any more."""
        shown = self.login.job_state(self.job_id)
        status = parse_scontrol_job(shown) if shown is not None else None
        if status is None:
            sacct = self.login.accounting(self.job_id)
            status = parse_sacct(sacct, self.job_id) if sacct is not None else None
        return status

    def follow(self, on_line: Callable[[str], None], deadline: float) -> int | None:
        """Poll the job and stream its output until it ends: its exit code (``job_outcome``).

        None when ``deadline`` (monotonic) passed first. A job PENDING past the slurm block's
        ``pending_limit_s`` is cancelled and gives 1, with its reason.
        """
        submitted = time.monotonic()
        interval = POLL_FIRST_S
        self._on_line = on_line
        self._emit(f"clusterctl: slurm job {self.job_id}: {self.job.directory}/job.sh", on_line)
        while True:
            status = self.status()
            self._read_output(on_line)
            if status is None or not status.active:
                self._read_output(on_line, final=True)
                self._done = True
                if status is None:
                    self._emit(
                        f"clusterctl: slurm job {self.job_id} left the queue; its state is unknown", on_line
                    )
                    return 1
                outcome = blame_first_task(job_outcome(status), status, self.lines)
                self._emit(f"clusterctl: {outcome.message}", on_line)
                return outcome.exit_code
            waited = time.monotonic() - submitted
            hopeless = hopeless_pending(status)
            if hopeless is not None:
                self.cancel()
                self._emit(f"clusterctl: slurm job {self.job_id} can never start: {hopeless}", on_line)
                return 1
            if status.state == "PENDING" and waited > self.slurm.pending_limit_s:
                self.cancel()
                self._emit(
                    f"clusterctl: slurm job {self.job_id} still PENDING after {waited:.0f} s "
                    f"(reason {status.reason}); cancelled (slurm.pending_limit_s {self.slurm.pending_limit_s:g})",
                    on_line,
                )
                return 1
            if time.monotonic() >= deadline:
                return None
            time.sleep(max(min(interval, deadline - time.monotonic()), 0))
            interval = min(interval * 1.5, POLL_MAX_S)

    def cancel(self) -> None:
        """scancel the job, then wait (at most ``CANCEL_DEADLINE_S``) until it has left squeue.

        What happened is said on the line callback ``follow`` was given (Ctrl-C: before re-raising).
        """
        if self._done:
            return
        self._done = True
        try:
            self.login.cancel(self.job_id)
            end = time.monotonic() + CANCEL_DEADLINE_S
            while time.monotonic() < end:
                queued = self.login.queue(self.job_id)
                status = parse_squeue(queued, self.job_id) if queued is not None else None
                if status is None or not status.active:
                    self._emit(
                        f"clusterctl: slurm job {self.job_id} cancelled; it has left the queue", self._on_line
                    )
                    return
                time.sleep(POLL_FIRST_S)
            self._emit(
                f"clusterctl: slurm job {self.job_id} still in the queue {CANCEL_DEADLINE_S:g} s after scancel; "
                f"check it with `squeue -j {self.job_id}` on {self.node.address}",
                self._on_line,
            )
        except ConnectError as exc:
            self._emit(f"clusterctl: could not cancel slurm job {self.job_id}: {exc}", self._on_line)
        finally:
            self.conn.close()

    def collect(self) -> Collected:
        """Every line of the job's output file and the launcher's own lines, the batch script, and the
        job's snapshots of its nodes (bundles, counters) and their telemetry; closes the connection."""
        try:
            printed = self.login.job_files(self.job.directory)
        except ConnectError as exc:
            self._emit(
                f"clusterctl: could not read slurm job {self.job_id}'s snapshots: {exc}", self._on_line
            )
            printed = None
        finally:
            self.conn.close()
        files = split_job_files(printed) if printed is not None else {}
        snapshots = read_job_snapshots(files, self.fabric, datetime.now(UTC).isoformat(timespec="seconds"))
        return Collected(
            "\n".join(self.lines) + "\n",
            self.job.script,
            counters=snapshots.counters,
            bundles=snapshots.bundles,
            telemetry=snapshots.telemetry,
            telemetry_errors=snapshots.telemetry_errors,
        )


class SlurmBackend:
    """sbatch through the inventory's slurm block, the ranks started by ``launcher`` (None: srun);
    ``login_readers`` reads the login node (over SSH unless told otherwise)."""

    name: LauncherName = "slurm"
    starter = "the Slurm job"

    def __init__(
        self, login_readers: LoginReadersFactory = ssh_login_readers, launcher: StepLauncher | None = None
    ) -> None:
        self.login_readers = login_readers
        self.launcher = launcher

    def describe(self, inventory: Inventory, job: Job) -> Description:
        """The batch script ``start`` would submit (its directory name differs per run)."""
        script = plan_batch(inventory, job, datetime.now(UTC), "DRYRUN", self.launcher).script
        return Description(text=script, fields={"launcher": self.name, "script": script})

    def job_image(self, inventory: Inventory) -> JobImage:
        """``slurm.image`` (or the nodes' own Python, runtime none), else the built image."""
        return slurm_job_image(inventory)

    def prepare(self, inventory: Inventory, job: Job, run_id: str) -> Job:
        """``job`` with the run's first rendezvous port: rank 0's node is the scheduler's choice, so the
        batch script checks it there and moves up while it is in use."""
        del inventory
        return with_rendezvous_port(job, rendezvous_ports(run_id)[0])

    def on_exactly(self, inventory: Inventory) -> Inventory:
        """``inventory`` with its slurm block's node list (``--nodelist``) set to its nodes, folded
        (``node[1-2]``): the inventory's node names are the Slurm node names."""
        slurm = slurm_block(inventory)
        pinned = slurm.model_copy(update={"nodelist": fold(n.name for n in inventory.nodes)})
        return inventory.model_copy(update={"slurm": pinned})

    def start(self, inventory: Inventory, plan: Job) -> SlurmLaunch:
        """Check the MPI plugin, write the batch script into its run directory and sbatch it.

        Raises:
            InputError: srun does not offer the slurm block's MPI plugin.
            ConnectError: the login node cannot be reached.
            RunFailed: the directory or script cannot be written, or sbatch refused the job.
        """
        slurm = slurm_block(inventory)
        job = plan_batch(inventory, plan, datetime.now(UTC), secrets.token_hex(3), self.launcher)
        node = login_node(slurm)
        conn = connect(inventory, node)
        try:
            job_id = _submit(conn, node, slurm, job)
        except BaseException:
            conn.close()
            raise
        return SlurmLaunch(
            slurm, node, conn, job, job_id, inventory.primary.fabric, self.login_readers(conn, node)
        )


def _submit(conn: fabric.Connection, node: Node, slurm: SlurmSpec, job: BatchJob) -> str:
    plugins = run(conn, node, ["srun", "--mpi=list"], timeout_s=COMMAND_TIMEOUT_S)
    if not plugins.ok:
        raise RunFailed(
            f"`srun --mpi=list` failed on the slurm login node {node.address}: "
            f"{(plugins.stderr or plugins.error or '').strip()[-300:]}. Fix: check that the Slurm client "
            "commands work there (munge running, slurm.conf or configless reachable)."
        )
    # srun 22.05 prints the list on stderr.
    offered = parse_mpi_list(plugins.stdout + plugins.stderr)
    if slurm.mpi not in offered:
        raise InputError(
            f"slurm.mpi {slurm.mpi!r}: srun on {node.address} offers {', '.join(offered) or 'no plugin'}. "
            "Fix: set slurm.mpi to one of them (pmix for Open MPI 4/5)."
        )
    made = run(conn, node, ["mkdir", "-p", "-m", "0750", "--", job.directory], timeout_s=COMMAND_TIMEOUT_S)
    if not made.ok:
        raise RunFailed(
            f"slurm login node {node.address}: cannot create {job.directory}: {made.stderr.strip()}"
        )
    script = f"{job.directory}/job.sh"
    try:
        with conn.sftp() as sftp:
            for source in payload_files():  # the copy every runtime mounts (or runs, with none)
                write_file(sftp, source, f"{job.directory}/{PAYLOAD_SUBDIR}/{source.name}", 0o644)
            write_file(sftp, job.script.encode(), script, 0o750)
    except OSError as exc:
        raise RunFailed(f"slurm login node {node.address}: cannot write {script}: {exc}") from None
    check_before_submit(conn, node, slurm, job, script)
    submitted = run(
        conn, node, ["sbatch", "--parsable", f"--chdir={job.directory}", script], timeout_s=COMMAND_TIMEOUT_S
    )
    job_id = submitted.stdout.strip().split(";", 1)[0]
    if not submitted.ok or not job_id.isdigit():
        said = (submitted.stderr or submitted.error or "").strip()
        raise RunFailed(
            f"sbatch on {node.address} refused {script}: {said} "
            f"(command: {shlex.join(['sbatch', '--parsable', script])}).{refusal_fix(said)}"
        )
    return job_id


def check_before_submit(
    conn: fabric.Connection, node: Node, slurm: SlurmSpec, job: BatchJob, script: str
) -> None:
    """What the login node says before the job is queued: pyxis loaded (``srun --help`` lists
    ``--container-image``; its text captured first, then matched, never piped into grep) where the
    runtime is pyxis, and ``sbatch --test-only`` accepting the request.

    Raises:
        InputError: pyxis is not loaded, or Slurm would refuse the request; nothing was queued.
    """
    if slurm.runtime == "pyxis":
        helped = run(conn, node, ["srun", "--help"], timeout_s=COMMAND_TIMEOUT_S)
        if "--container-image" not in helped.stdout + helped.stderr:
            raise InputError(
                f"slurm.runtime is pyxis, but `srun --help` on the login node {node.address} lists no "
                "--container-image: the pyxis SPANK plugin is not loaded there. Fix: install pyxis built "
                "against this Slurm release and name it in plugstack.conf on the login and compute nodes, "
                "or set slurm.runtime to apptainer, docker or none."
            )
    argv = ["sbatch", "--test-only", f"--chdir={job.directory}", script]
    tested = run(conn, node, argv, timeout_s=COMMAND_TIMEOUT_S)
    if not tested.ok:
        said = (tested.stderr or tested.error or "").strip()[-500:]
        fix = refusal_fix(said) or (
            " Fix: change the slurm block (partition, gpus_per_node, time_limit, extra_sbatch) to a request "
            "this cluster can satisfy."
        )
        raise InputError(
            f"`sbatch --test-only` on {node.address} refused the job before it was queued: {said} "
            f"(command: {shlex.join(argv)}).{fix}"
        )
