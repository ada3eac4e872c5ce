"""Parsers the workloads import: tf_cnn_benchmarks, Horovod synthetic, nccl-tests, NCCL log, MPI errors."""

from __future__ import annotations

import pytest

from clusterctl.diagnostics.parsers.horovod_synthetic import parse_horovod_synthetic
from clusterctl.diagnostics.parsers.mpi_error import parse_mpi_error
from clusterctl.diagnostics.parsers.nccl_log import parse_nccl_log
from clusterctl.diagnostics.parsers.nccl_tests import parse_nccl_tests
from clusterctl.diagnostics.parsers.tf_cnn_benchmarks import parse_tf_cnn_benchmarks
from clusterctl.diagnostics.rules import separate_jobs_rules
from tests.fixtures import FIXTURES, all_fixtures, fixture_text
from tests.helpers.strictjson import strict_loads


def test_tf_cnn_settings_and_total_from_lambda_log() -> None:
    result = parse_tf_cnn_benchmarks(
        fixture_text("tf_cnn_benchmarks/lambda-4xa100-pcie-tf1.15-resnet50-fp32.txt")
    )
    assert result.model == "resnet50"
    assert result.batch_size_per_device == 224
    assert result.batch_size_global == 896
    assert result.num_gpus == 4
    assert result.total_images_per_sec == pytest.approx(3665.99)
    assert result.steps[-1].step == 100


def test_tf_cnn_interleaved_ranks_total_is_not_summed() -> None:
    result = parse_tf_cnn_benchmarks(
        fixture_text(
            "tf_cnn_benchmarks/horovod-issue693-4x1080ti-horovod-interleaved-accuracy-cols-partial.txt"
        )
    )
    assert result.total_images_per_sec == pytest.approx(608.38)
    assert result.unparsed_lines == []


def test_tf_cnn_prefers_rank0_tagged_total() -> None:
    text = (
        "[1,1]<stdout>:total images/sec: 900.00\n"
        "[1,0]<stdout>:Model:       resnet50\n"
        "[1,0]<stdout>:total images/sec: 1000.50\n"
        "[1,2]<stdout>:total images/sec: 800.00\n"
    )
    result = parse_tf_cnn_benchmarks(text)
    assert result.total_images_per_sec == pytest.approx(1000.50)
    assert result.total_lines == 3
    assert result.model == "resnet50"


def test_tf_cnn_header_with_devices_list() -> None:
    result = parse_tf_cnn_benchmarks(
        fixture_text("tf_cnn_benchmarks/kubeflow-mpi-operator-horovod-2gpu-resnet101-elided.txt")
    )
    assert (result.model, result.batch_size_per_device, result.num_gpus) == ("resnet101", 64, 2)
    assert result.variable_update == "horovod"
    assert result.total_images_per_sec == pytest.approx(308.27)


def test_horovod_synthetic_rank_prefixed() -> None:
    result = parse_horovod_synthetic(
        fixture_text("horovod_synthetic/horovod-issue2686-pytorch-synthetic-1gpu-gloo-rank-prefix.txt")
    )
    assert (result.model, result.batch_size, result.num_gpus) == ("resnet50", 32, 1)
    assert result.total_images_per_sec == pytest.approx(124.7)
    assert len(result.iterations) == 10


def test_horovod_synthetic_partial_takes_gpu_count_from_total_line() -> None:
    result = parse_horovod_synthetic(
        fixture_text("horovod_synthetic/deepops-k8s-sriov-roce-16gpu-tf-synthetic-from-running-benchmark.txt")
    )
    assert result.model is None
    assert result.num_gpus == 16
    assert result.total_images_per_sec == pytest.approx(3756.0)
    assert result.images_per_sec_per_device == pytest.approx(234.8)


def test_horovod_synthetic_ignores_other_ranks() -> None:
    text = "[1]<stdout>:Total img/sec on 2 GPU(s): 1.0 +-0.1\n[0]<stdout>:Total img/sec on 2 GPU(s): 200.0 +-3.0\n"
    assert parse_horovod_synthetic(text).total_images_per_sec == pytest.approx(200.0)


def test_nccl_tests_new_format() -> None:
    result = parse_nccl_tests(
        fixture_text("nccl_tests/oci-bm-gpu-h100-8-2node-16gpu-roce-all_reduce_perf-1G-16G.txt")
    )
    assert result.avg_bus_bandwidth_gb_per_s == pytest.approx(458.452)
    assert result.out_of_bounds == 0 and result.out_of_bounds_ok is True
    assert len(result.rows) == 5
    assert result.rows[0].size == 1073741824
    assert result.rows[0].busbw == pytest.approx(446.28)
    assert result.rows[-1].in_place_busbw == pytest.approx(464.79)
    assert result.ranks == 16


def test_nccl_tests_old_error_column_and_interleaved_info() -> None:
    result = parse_nccl_tests(
        fixture_text("nccl_tests/superbench-testdata-8xa100-sxm4-single-node-g8-validation0.txt")
    )
    assert result.avg_bus_bandwidth_gb_per_s == pytest.approx(68.4048)
    assert result.rows[0].error == "N/A"
    assert result.peak_bus_bandwidth_gb_per_s == pytest.approx(235.26)
    assert result.unparsed_lines == []


def test_nccl_tests_failure_without_table() -> None:
    result = parse_nccl_tests(
        fixture_text("nccl_tests/nccl-tests-issue5-nccl1-8xp100-pcie-old-format-then-failure.txt")
    )
    assert result.rows == []
    assert result.avg_bus_bandwidth_gb_per_s is None
    assert result.errors == ["NCCL failure all_reduce.cu:95 'unhandled cuda error'"]
    assert result.nccl_version == "1.0"


def test_nccl_log_ib_with_gdr_and_tags() -> None:
    text = (
        "[1,0]<stdout>:node1:123:456 [0] NCCL INFO NCCL version 2.7.8+cuda10.2\n"
        "[1,0]<stdout>:node1:123:456 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>\n"
        "node1:123:456 [0] NCCL INFO Channel 00 : 0[3000] -> 1[3000] [send] via NET/IB/0/GDRDMA\n"
    )
    result = parse_nccl_log(text)
    assert result.transport == "IB"
    assert result.gdr is True
    assert result.hcas == ["mlx5_0:1"]
    assert result.nccl_version == "2.7.8+cuda10.2"


def test_nccl_log_socket_fallback() -> None:
    text = (
        "node1:1:2 [0] NCCL INFO NET/IB : No device found.\n"
        "node1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "node1:1:2 [0] NCCL INFO Channel 00 : 0 -> 1 [send] via NET/Socket/0\n"
    )
    result = parse_nccl_log(text)
    assert result.transport == "Socket"
    assert result.ib_no_device is True
    assert result.gdr is False
    assert result.socket_interfaces == ["eth0"]


def test_nccl_log_warnings_are_errors() -> None:
    result = parse_nccl_log(
        fixture_text("nccl_errors/nccl-issue1405-net-ib-status12-vendor-err-129-roce.txt")
    )
    assert len(result.errors) == 2
    assert "status=12" in result.errors[0]
    assert result.transport == "IB" and result.transport_from_errors


@pytest.mark.parametrize(
    ("relative", "category"),
    [
        ("mpi_errors/covizu-issue350-orte-unable-to-start-daemons-full.txt", "daemons-failed-to-start"),
        ("mpi_errors/deepbench-issue97-nccl-failure-abort-primary-job-terminated.txt", "rank-crashed"),
        ("mpi_errors/nccl-tests-issue218-mpirun-noticed-rank3-signal11-partial.txt", "rank-crashed"),
        ("mpi_errors/nccl-tests-issue322-test-nccl-failure-mpirun-detected-nonzero.txt", "nonzero-exit"),
        (
            "mpi_errors/ompi-issue11063-openib-no-active-ports-warning-then-hello.txt",
            "openib-no-active-ports",
        ),
        ("mpi_errors/ompi-issue7413-prrte-not-enough-slots-7-partial.txt", "not-enough-slots"),
        ("mpi_errors/clusterctl-sandbox-orte-lost-remote-daemon-container-killed.txt", "daemon-lost"),
    ],
)
def test_mpi_error_categories(relative: str, category: str) -> None:
    assert parse_mpi_error(fixture_text(relative)).category == category


def test_mpi_error_details() -> None:
    crashed = parse_mpi_error(
        fixture_text("mpi_errors/nccl-tests-issue218-mpirun-noticed-rank3-signal11-partial.txt")
    )
    assert (crashed.rank, crashed.signal, crashed.hosts) == (3, 11, ["10.10.21.2"])
    nonzero = parse_mpi_error(
        fixture_text("mpi_errors/nccl-tests-issue322-test-nccl-failure-mpirun-detected-nonzero.txt")
    )
    assert nonzero.exit_code == 3
    slots = parse_mpi_error(fixture_text("mpi_errors/ompi-issue7413-prrte-not-enough-slots-7-partial.txt"))
    assert slots.requested_slots == 7


def test_mpi_error_lost_daemon_names_the_remote_host_not_mpiruns() -> None:
    lost = parse_mpi_error(
        fixture_text("mpi_errors/clusterctl-sandbox-orte-lost-remote-daemon-container-killed.txt")
    )
    assert lost.lost_host == "10.213.218.12"
    assert lost.summary.startswith("mpirun lost its daemon on 10.213.218.12:")
    assert lost.unparsed_lines == []
    # the same kill while node2's orted was starting: ORTE's other block, the host from ssh's line
    starting = parse_mpi_error(
        fixture_text("mpi_errors/clusterctl-sandbox-orte-daemon-start-container-killed.txt")
    )
    assert (starting.category, starting.lost_host) == ("daemons-failed-to-start", "10.213.126.12")
    assert starting.summary.startswith("mpirun could not start its daemon on 10.213.126.12: that node closed")
    # without ssh's line (a daemon that never started anywhere) no host is made up
    plain = parse_mpi_error(fixture_text("mpi_errors/covizu-issue350-orte-unable-to-start-daemons-full.txt"))
    assert plain.lost_host is None and "on the other nodes" in plain.summary


def test_a_failed_slurm_step_names_the_task_that_failed_first() -> None:
    # srun --kill-on-bad-exit on the sandbox's real Slurm: task 1 exited 3, then srun ended task 0 (143).
    failed = parse_mpi_error(fixture_text("slurm/sandbox_srun_kill_on_bad_exit.out"))
    assert (failed.category, failed.rank, failed.exit_code) == ("nonzero-exit", 1, 3)
    assert failed.summary == (
        "task 1 on node2 (Exited with exit code 3) failed first; srun ended the other tasks after it"
    )
    assert failed.hosts[0] == "node2"
    assert not any(line.startswith("srun: error:") for line in failed.unparsed_lines)
    crashed = parse_mpi_error("srun: error: node1: tasks 0-3: Segmentation fault (core dumped)\n")
    assert (crashed.category, crashed.signal, crashed.rank) == ("rank-crashed", 11, None)
    assert crashed.summary == "tasks 0-3 on node1 (Segmentation fault (core dumped)) failed first"


def test_mpi_error_ssh_and_unknown() -> None:
    ssh = parse_mpi_error("ssh: connect to host node2 port 50000: Connection refused\n")
    assert ssh.category == "ssh-connect-failed"
    assert ssh.hosts == ["node2"]
    assert parse_mpi_error("all good\n").category == "unknown"


def test_nccl_tests_row_with_the_next_lines_tag_glued_on() -> None:
    """mpirun --tag-output can glue the next line's tag to a row's end (seen from the allreduce payload)."""
    text = (
        "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "[1,0]<stdout>:     1048576        262144     float     sum      -1   2054.6    0.51    0.51      0[1,0]<stdout>:\n"
    )
    [row] = parse_nccl_tests(text).rows
    assert (row.size, row.busbw, row.error) == (1048576, 0.51, "0")


def test_a_ranks_line_glued_onto_another_ranks_line_is_still_counted() -> None:
    """Under load mpirun forwarded rank 1's device line before rank 0's newline (seen from the allreduce
    payload on the 2-core CI machine): each tagged line is read on its own, so both ranks count."""
    text = (
        "[1,0]<stdout>:#  Rank  0 Group  0 Pid   4242 on     ci-box device  0 [cpu] CPU"
        "[1,1]<stdout>:#  Rank  1 Group  0 Pid   4243 on     ci-box device  0 [cpu] CPU\n"
        "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "[1,0]<stdout>:     1048576        262144     float     sum      -1   2054.6    0.51    0.51      0\n"
    )
    parsed = parse_nccl_tests(text)
    assert parsed.ranks == 2 and parsed.unparsed_lines == []
    assert [row.size for row in parsed.rows] == [1048576]


_TWO_RANK0_NRANKS_1 = (
    "nccl_tests/nccl-tests-issue329-2-containers-built-without-mpi-two-rank0-nranks-1-partial.txt"
)


@pytest.mark.parametrize(
    "fixture",
    [
        "nccl_tests/nccl-tests-issue107-2node-built-without-mpi-two-rank0-jobs-partial.txt",
        "nccl_tests/nccl-tests-issue27-2node-built-without-mpi-two-summaries-partial.txt",
        "nccl_tests/nccl-tests-issue213-2node-h800-run-separately-partial.txt",
        _TWO_RANK0_NRANKS_1,
    ],
)
def test_nccl_tests_built_without_mpi_is_named_as_that_mistake_not_a_slow_fabric(fixture: str) -> None:
    parsed = parse_nccl_tests(fixture_text(fixture))
    assert parsed.jobs == 2
    [finding] = separate_jobs_rules(parsed, "n1")
    assert (finding.severity, finding.code, finding.node) == ("error", "nccl-tests-not-mpi", "n1")
    assert "make MPI=1" in finding.advice and "2 separate" in finding.message


def test_every_real_single_job_nccl_tests_output_is_one_job() -> None:
    single = [
        f
        for f in all_fixtures()
        if f.parent.name == "nccl_tests" and "without-mpi" not in f.name and "separately" not in f.name
    ]
    assert len(single) >= 7
    for path in single:
        parsed = parse_nccl_tests(fixture_text(f"nccl_tests/{path.name}"))
        assert parsed.jobs <= 1, path.name
        assert separate_jobs_rules(parsed) == []


_ROWS_ONLY = "nccl_tests/nccl-tests-issue294-2node-h100-built-without-mpi-rows-only-busbw-0-partial.txt"


def test_rows_pasted_alone_with_sizes_repeated_at_busbw_0_are_one_rank_jobs() -> None:
    """No header, no summary, no repeated banner: only each size twice, moving data with a busbw of 0."""
    parsed = parse_nccl_tests(fixture_text(_ROWS_ONLY))
    assert parsed.jobs == 0 and parsed.unparsed_lines == []
    assert [row.size for row in parsed.rows] == [134217728, 134217728, 536870912, 536870912, 268435456]
    assert (parsed.repeated_rows, parsed.single_rank_rows) == (2, 5)
    [finding] = separate_jobs_rules(parsed, "n1")
    assert (finding.severity, finding.code, finding.node) == ("error", "nccl-tests-not-mpi", "n1")
    assert "appears up to 2 times" in finding.message and "busbw of 0" in finding.message
    assert "make MPI=1" in finding.advice


def test_inspect_detects_rows_pasted_alone_and_names_the_build_without_mpi(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusterctl.cli import main

    assert main(["inspect", str(FIXTURES / _ROWS_ONLY), "--json"]) == 1
    [result] = strict_loads(capsys.readouterr().out)
    assert result["kind"] == "nccl-tests" and result["unparsed_lines"] == []
    assert "nccl-tests-not-mpi" in [f["code"] for f in result["findings"]]


def test_a_real_multi_rank_table_is_not_taken_for_one_rank_jobs() -> None:
    """One job whose rows each appear once per reduction op (`-o all`) or with a real busbw is one job."""
    for path in (f for f in all_fixtures() if f.parent.name == "nccl_tests" and "without-mpi" not in f.name):
        parsed = parse_nccl_tests(fixture_text(f"nccl_tests/{path.name}"))
        assert parsed.single_rank_processes <= 1, path.name
        assert not (parsed.repeated_rows > 1 and parsed.single_rank_rows >= parsed.repeated_rows), path.name


def test_processes_whose_nccl_init_says_nranks_1_are_one_rank_jobs() -> None:
    """Two processes (454 and 808) each set up NCCL with `rank 0 nranks 1`: the sign that still names the
    mistake in a paste that kept the NCCL lines but not the repeated banner or Rank 0 lines."""
    parsed = parse_nccl_tests(fixture_text(_TWO_RANK0_NRANKS_1))
    assert parsed.single_rank_processes == 2
    [finding] = separate_jobs_rules(parsed.model_copy(update={"jobs": 1}), "n1")
    assert (
        finding.code == "nccl-tests-not-mpi"
        and "2 processes each set up NCCL with `nranks 1`" in finding.message
    )
