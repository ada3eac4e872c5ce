"""The slurm launch's poll loop against a login node that answers with real Slurm 22.05 outputs
(tests/fixtures/slurm/sandbox_*): output streaming, the final state, a job PENDING past its limit."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from clusterctl.errors import InputError
from clusterctl.hosts.command import CommandResult
from clusterctl.inventory import FabricSpec, SlurmSpec
from clusterctl.run.backends import slurm as slurm_launcher
from clusterctl.run.backends.slurm import LoginReaders, SlurmLaunch
from clusterctl.run.slurm.script import BatchJob, login_node
from tests.fixtures import fixture_text

ETHERNET = FabricSpec(kind="ethernet", interface="eth0")


@dataclass
class LoginNode:
    """The login node behind the launch's readers: the controller's record of the job from ``states`` in
    turn (the last one stays), the output file in ``chunks``, the snapshot files, the queue until scancel."""

    states: list[str | None]  # None: the controller no longer knows the job (scontrol failed)
    chunks: list[str]
    calls: list[tuple[str, str]] = field(default_factory=list)  # (reader, job id or path)
    cancelled: bool = False
    files: str = ""  # what the job directory's snapshot files print
    sacct: str | None = None  # what accounting prints of the job

    def job_state(self, job_id: str) -> str | None:
        self.calls.append(("job_state", job_id))
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def output(self, path: str, offset: int) -> str:
        self.calls.append(("output", path))
        return self.chunks.pop(0) if self.chunks else ""

    def job_files(self, directory: str) -> str:
        self.calls.append(("job_files", directory))
        return self.files

    def accounting(self, job_id: str) -> str | None:
        self.calls.append(("accounting", job_id))
        return self.sacct

    def cancel(self, job_id: str) -> None:
        self.calls.append(("cancel", job_id))
        self.cancelled = True

    def queue(self, job_id: str) -> str:
        self.calls.append(("queue", job_id))
        return "" if self.cancelled else _text("sandbox_squeue_pending.out")

    def readers(self) -> LoginReaders:
        return LoginReaders(
            job_state=self.job_state,
            accounting=self.accounting,
            queue=self.queue,
            output=self.output,
            job_files=self.job_files,
            cancel=self.cancel,
        )


class Closed:
    def close(self) -> None:
        pass


def _launch(
    login: LoginNode, monkeypatch: pytest.MonkeyPatch, job_id: str = "8", **spec: object
) -> SlurmLaunch:
    monkeypatch.setattr(slurm_launcher.time, "sleep", lambda s: None)
    slurm = SlurmSpec.model_validate(
        {"login": {"address": "10.0.0.1"}, "run_dir": "/shared", "runtime": "none", **spec}
    )
    job = BatchJob(script="#!/bin/bash\n", directory="/shared/j", output="/shared/j/output.log")
    return SlurmLaunch(slurm, login_node(slurm), Closed(), job, job_id, ETHERNET, login.readers())


def _text(name: str) -> str:
    return fixture_text(f"slurm/{name}")


def test_output_is_streamed_by_whole_lines_and_the_final_state_is_the_exit_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    login = LoginNode(
        states=[_text("sandbox_scontrol_o_pending.out"), _text("sandbox_scontrol_o_failed_3.out")],
        chunks=["0: hello\n1: rank 1 ex", "its 3\n"],
    )
    launch = _launch(login, monkeypatch)
    seen: list[str] = []
    assert launch.follow(seen.append, deadline=float("inf")) == 3
    assert seen[1:3] == ["0: hello", "1: rank 1 exits 3"]
    assert seen[-1] == "clusterctl: slurm job 8 FAILED (reason NonZeroExitCode, ExitCode 3:0)"
    assert "1: rank 1 exits 3" in launch.collect().output


def test_a_job_pending_past_its_limit_is_cancelled_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    login = LoginNode(states=[_text("sandbox_scontrol_o_pending.out")], chunks=[])
    launch = _launch(login, monkeypatch, pending_limit_s=0.001)
    seen: list[str] = []
    assert launch.follow(seen.append, deadline=float("inf")) == 1
    assert ("cancel", "8") in login.calls
    assert "clusterctl: slurm job 8 cancelled; it has left the queue" in seen
    assert any("still PENDING" in line and "reason Resources" in line for line in seen)


def test_the_deadline_stops_following_and_cancel_waits_for_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    login = LoginNode(states=[_text("sandbox_scontrol_o_pending.out")], chunks=[])
    launch = _launch(login, monkeypatch)
    assert launch.follow(lambda line: None, deadline=0.0) is None
    assert not login.cancelled
    launch.cancel()
    assert login.cancelled and login.calls[-1] == ("queue", "8")
    launch.cancel()  # a second cancel does nothing
    assert login.calls.count(("cancel", "8")) == 1


def _framed_snapshot(name: str, counters: str) -> str:
    """A snapshot file as job_files_command prints it: the counters section as the collection frames it."""
    mark = "@@clusterctl-collect@@"
    return f"\n@@clusterctl-file@@ {name}\n\n{mark} begin fabric-counters\n{counters}\n{mark} exit 0\n\n{mark} end\n"


def test_collect_hands_over_the_script_and_the_counters_read_in_the_allocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counters = fixture_text("net_statistics/eth0-and-missing-interface-grep.txt")
    login = LoginNode(
        states=[_text("sandbox_scontrol_o_failed_3.out")],
        chunks=[],
        files=_framed_snapshot("topology-before-c7.txt", counters)
        + _framed_snapshot("topology-after-c7.txt", counters),
    )
    launch = _launch(login, monkeypatch)
    launch.follow(lambda line: None, deadline=float("inf"))
    got = launch.collect()
    assert got.command == "#!/bin/bash\n"
    assert got.counters is not None
    before, after = got.counters
    assert set(before) == set(after) == {"c7"} and after["c7"].ports["eth0"].tx == 5770551
    assert set(got.bundles) == {"topology", "topology-after"}


def test_a_job_that_can_never_start_is_cancelled_at_once_with_the_cause_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 2 ranks per node on nodes declaring 1 CPU: Slurm keeps it PENDING (PartitionConfig) forever
    login = LoginNode(states=[_text("sandbox_scontrol_o_pending_partitionconfig.out")], chunks=[])
    launch = _launch(login, monkeypatch)  # pending_limit_s: the default hour
    seen: list[str] = []
    assert launch.follow(seen.append, deadline=float("inf")) == 1
    assert login.calls.count(("cancel", "8")) == 1
    assert login.calls.count(("job_state", "8")) == 1  # no second poll
    (cause,) = [line for line in seen if "can never start" in line]
    assert "reason PartitionConfig" in cause and "more tasks per node than a node has CPUs" in cause
    assert "Fix: ask for what the partition has" in cause and "--ranks-per-node" in cause


def test_a_job_the_controller_forgot_is_read_from_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pending, then gone from the controller (MinJobAge passed): sacct's allocation line gives the end."""
    login = LoginNode(
        states=[_text("sandbox_scontrol_o_pending.out"), None],
        chunks=["0: started\n"],
        sacct=_text("sacct_P_failed.out"),
    )
    launch = _launch(login, monkeypatch, job_id="2355542")
    seen: list[str] = []
    assert launch.follow(seen.append, deadline=float("inf")) == 1
    assert login.calls.count(("accounting", "2355542")) == 1  # asked only once the controller forgot
    assert "0: started" in seen and seen[-1].startswith("clusterctl: slurm job 2355542 FAILED")


def test_a_job_neither_the_controller_nor_accounting_knows_ends_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    login = LoginNode(states=[None], chunks=[])
    launch = _launch(login, monkeypatch)
    seen: list[str] = []
    assert launch.follow(seen.append, deadline=float("inf")) == 1
    assert seen[-1] == "clusterctl: slurm job 8 left the queue; its state is unknown"


@dataclass
class Checker:
    """A login node answering the pre-submit checks: ``srun --help`` and ``sbatch --test-only``."""

    help_text: str
    test_only: tuple[int, str] = (
        0,
        "sbatch: Job 12 to start at 2026-11-27T16:00:00 using 4 processors on nodes node[1-2] in partition sandbox\n",
    )
    calls: list[list[str]] = field(default_factory=list)

    def run(self, conn: object, node: object, argv: list[str], *, timeout_s: float) -> CommandResult:
        self.calls.append(argv)
        if argv[:2] == ["srun", "--help"]:
            return CommandResult("slurm-login", " ".join(argv), 0, self.help_text)
        code, said = self.test_only
        return CommandResult("slurm-login", " ".join(argv), code, "", said)


def _check(checker: Checker, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    monkeypatch.setattr(slurm_launcher, "run", checker.run)
    slurm = SlurmSpec.model_validate(
        {
            "login": {"address": "10.0.0.1"},
            "run_dir": "/shared",
            "runtime": runtime,
            "image": "nvcr.io#nvidia/pytorch:24.01-py3",
        }
    )
    job = BatchJob(script="#!/bin/bash\n", directory="/shared/j", output="/shared/j/output.log")
    slurm_launcher.check_before_submit(Closed(), login_node(slurm), slurm, job, "/shared/j/job.sh")


def test_pyxis_must_be_loaded_and_the_request_accepted_before_the_job_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pyxis = Checker(_text("pyxis_readme_srun_help.out"))
    _check(pyxis, monkeypatch, "pyxis")
    assert pyxis.calls == [
        ["srun", "--help"],
        ["sbatch", "--test-only", "--chdir=/shared/j", "/shared/j/job.sh"],
    ]
    plain = Checker(_text("sandbox_srun_help.out"))  # a Slurm without pyxis
    with pytest.raises(InputError, match="lists no --container-image: the pyxis SPANK plugin is not loaded"):
        _check(plain, monkeypatch, "pyxis")
    assert plain.calls == [["srun", "--help"]]  # nothing tested, nothing queued
    _check(Checker(_text("sandbox_srun_help.out")), monkeypatch, "docker")  # docker needs no pyxis
    unsatisfiable = Checker(
        _text("pyxis_readme_srun_help.out"), (1, _text("sandbox_sbatch_test_only_unsatisfiable.out"))
    )
    with pytest.raises(
        InputError,
        match="refused the job before it was queued: allocation failure: Requested node configuration is not available",
    ):
        _check(unsatisfiable, monkeypatch, "pyxis")
