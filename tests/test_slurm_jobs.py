"""Slurm job states to exit codes, on outputs captured from real clusters (tests/fixtures/slurm)."""

from __future__ import annotations

import pytest

from clusterctl.diagnostics.model import split_tag
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
    task_failures,
)
from tests.fixtures import fixture_text


@pytest.mark.parametrize(
    ("name", "job_id", "state", "exit_code", "words"),
    [
        ("scontrol_o_completed.out", "2", "COMPLETED", 0, "COMPLETED (ExitCode 0:0)"),
        ("scontrol_o_timeout.out", "3", "TIMEOUT", 124, "reason TimeLimit, ExitCode 0:15"),
        ("scontrol_failed_127.out", "309684", "FAILED", 127, "reason NonZeroExitCode, ExitCode 127:0"),
        ("scontrol_out_of_memory.out", "569966", "OUT_OF_MEMORY", 137, "reason OutOfMemory"),
        ("sandbox_scontrol_o_failed_3.out", "8", "FAILED", 3, "reason NonZeroExitCode, ExitCode 3:0"),
        ("sandbox_scontrol_o_cancelled.out", "7", "CANCELLED", 143, "CANCELLED (ExitCode 0:15)"),
    ],
)
def test_scontrol_states_map_to_exit_codes(
    name: str, job_id: str, state: str, exit_code: int, words: str
) -> None:
    status = parse_scontrol_job(fixture_text(f"slurm/{name}"))
    assert status is not None and (status.job_id, status.state) == (job_id, state)
    assert not status.active
    outcome = job_outcome(status)
    assert outcome.exit_code == exit_code
    assert words in outcome.message and f"slurm job {job_id} {state}" in outcome.message


def test_sacct_reads_the_allocation_line_not_its_steps() -> None:
    status = parse_sacct(fixture_text("slurm/sacct_P_failed.out"), "2355542")
    assert status == JobStatus("2355542", "FAILED", None, 1, 0)
    assert job_outcome(status).exit_code == 1
    assert parse_sacct(fixture_text("slurm/sacct_P_failed.out"), "99") is None


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (JobStatus("7", "CANCELLED", None, 0, 15), 143),
        (JobStatus("7", "NODE_FAIL", "NodeDown", 0, 0), 1),
        (JobStatus("7", "FAILED", "NonZeroExitCode", 3, 0), 3),
        (JobStatus("7", "FAILED", "NonZeroExitCode", 0, 9), 137),
        (JobStatus("7", "PREEMPTED", None, None, None), 1),
    ],
)
def test_other_final_states(status: JobStatus, code: int) -> None:
    assert job_outcome(status).exit_code == code


def test_pending_jobs_are_active_with_their_reason() -> None:
    status = parse_squeue(fixture_text("slurm/sandbox_squeue_pending.out"), "8")
    assert status is not None and status.active and status.reason == "Resources"
    assert parse_squeue("", "8") is None  # left the queue
    shown = parse_scontrol_job(fixture_text("slurm/sandbox_scontrol_o_pending.out"))
    assert shown is not None and shown.active and (shown.state, shown.reason) == ("PENDING", "Resources")


def test_unreadable_text_gives_none() -> None:
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified\n") is None
    assert parse_sacct("garbage", "1") is None


@pytest.mark.parametrize(
    ("fixture", "plugins"),
    [
        ("deepops_pr494_srun_mpi_list_pre_23_02.out", ["none", "openmpi", "pmi2", "pmix_v3", "pmix"]),
        ("aws_parallelcluster_srun_mpi_list_pre_23_02.out", ["none", "openmpi", "pmi2", "pmix", "pmix_v3"]),
    ],
)
def test_mpi_list_of_slurm_before_23_02_every_line_prefixed(fixture: str, plugins: list[str]) -> None:
    assert parse_mpi_list(fixture_text(f"slurm/{fixture}")) == plugins


def test_mpi_list_of_slurm_22_05() -> None:
    text = fixture_text("slurm/sandbox_srun_mpi_list.out")
    assert parse_mpi_list(text) == ["pmix", "none", "cray_shasta", "pmi2", "pmix_v4"]


def test_srun_labels_are_rank_tags() -> None:
    assert split_tag("0: CLUSTERCTL_RESULT {}") == (0, "CLUSTERCTL_RESULT {}")
    assert split_tag(" 3: step 10") == (3, "step 10")
    assert split_tag("[1,2]<stdout>:x") == (2, "x")


def test_only_reasons_no_wait_cures_are_hopeless() -> None:
    never = parse_scontrol_job(fixture_text("slurm/sandbox_scontrol_o_pending_partitionconfig.out"))
    assert never is not None and never.reason == "PartitionConfig"
    assert "PartitionConfig" in (hopeless_pending(never) or "")
    waiting = parse_scontrol_job(fixture_text("slurm/sandbox_scontrol_o_pending.out"))
    assert waiting is not None and waiting.reason == "Resources" and hopeless_pending(waiting) is None
    finished = parse_scontrol_job(fixture_text("slurm/sandbox_scontrol_o_failed_3.out"))
    assert finished is not None and hopeless_pending(finished) is None


def test_an_unsatisfiable_sbatch_refusal_gets_the_fix() -> None:
    said = fixture_text("slurm/sandbox_sbatch_test_only_unsatisfiable.out")
    assert "Fix: ask for what the partition has" in refusal_fix(said)
    assert refusal_fix("sbatch: error: Invalid account or account/partition combination specified") == ""


def test_the_first_task_to_fail_is_blamed_not_the_one_srun_terminated_after() -> None:
    # rank 1 exits 3; srun (--kill-on-bad-exit) then terminates rank 0, whose 143 is srun's exit code
    lines = fixture_text("slurm/sandbox_srun_kill_on_bad_exit.out").splitlines()
    status = parse_scontrol_job(fixture_text("slurm/sandbox_scontrol_o_failed_143.out"))
    assert status is not None and status.state == "FAILED" and status.exit_code == 143
    assert [(f.host, f.tasks, f.exit_code) for f in task_failures(lines)] == [
        ("node2", "1", 3),
        ("node1", "0", 143),
    ]
    outcome = blame_first_task(job_outcome(status), status, lines)
    assert outcome.exit_code == 3
    assert "ExitCode 143:0" in outcome.message
    assert "the first to fail: task 1 on node2 (Exited with exit code 3), exit code 3" in outcome.message


def test_a_job_s_own_code_below_128_stays_and_other_states_are_left_alone() -> None:
    # the image check's step failed (exit 1) and the script ended the job with its own code, 3
    lines = ["srun: error: node1: task 0: Exited with exit code 1", "clusterctl: the image check failed (1)"]
    failed = JobStatus("8", "FAILED", "NonZeroExitCode", 3, 0)
    outcome = blame_first_task(job_outcome(failed), failed, lines)
    assert (
        outcome.exit_code == 3
        and "the first to fail: task 0 on node1 (Exited with exit code 1)" in outcome.message
    )
    cancelled = JobStatus("7", "CANCELLED", None, 0, 15)
    assert blame_first_task(job_outcome(cancelled), cancelled, lines) == job_outcome(cancelled)
    assert blame_first_task(job_outcome(failed), failed, ["0: rank 0 exits 0"]) == job_outcome(failed)


@pytest.mark.parametrize(
    ("line", "tasks", "code"),
    [
        ("srun: error: node3: tasks 0-3: Killed", "0-3", 137),
        ("srun: error: gpu-a01: task 5: Segmentation fault (core dumped)", "5", 139),
        ("srun: error: node1: tasks 0,2: Exited with exit code 2", "0,2", 2),
        ("srun: error: node1: task 0: Something srun says that is no signal", "0", None),
    ],
)
def test_task_failure_lines_give_the_tasks_and_a_code(line: str, tasks: str, code: int | None) -> None:
    (failure,) = task_failures([line])
    assert failure.tasks == tasks and failure.exit_code == code


def test_a_task_that_exited_0_is_no_failure() -> None:
    assert task_failures(["srun: error: node1: task 0: Exited with exit code 0", "1: srun: error: x"]) == []
