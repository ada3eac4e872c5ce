"""Fabric proof, run judgement and run directories, on real logs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterctl.inventory import load_inventory
from clusterctl.results.nccl_log_proof import CPU_TRANSPORT, prove_fabric
from clusterctl.results.record import read_record
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import run_options
from clusterctl.run.rundir import new_run_dir, write_run_dir
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.fixtures import fixture_text
from tests.helpers.judged import ROOT, paper_record

FIXTURES = Path(__file__).parent / "fixtures"
# NCCL INFO lines in the format quoted in FIELD-NOTES (horovod#288: the whitepaper's own C4140 setup).
IB_LINES = (
    "c4140-1:100:200 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>\n"
    "c4140-1:100:300 [0] NCCL INFO Channel 00 : 3[b000] -> 4[1a000] [send] via NET/IB/0/GDRDMA\n"
)
SOCKET_LINES = "c4140-1:100:200 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.1<0>\n"


def test_ib_with_gdrdma_is_recorded_with_its_hca() -> None:
    proof = prove_fabric(IB_LINES, fabric_kind="infiniband", gpu=True, nodes=2)
    assert (proof.transport, proof.gdr, proof.valid) == ("NET/IB", True, True)
    assert proof.hcas == ["mlx5_0:1"]


def test_socket_fallback_on_infiniband_invalidates_the_run() -> None:
    proof = prove_fabric(SOCKET_LINES, fabric_kind="infiniband", gpu=True, nodes=2)
    assert proof.transport == "NET/Socket"
    assert not proof.valid
    assert "NCCL used NET/Socket" in (proof.reason or "")


def test_sockets_on_ethernet_are_what_was_asked() -> None:
    assert prove_fabric(SOCKET_LINES, fabric_kind="ethernet", gpu=True, nodes=2).valid


def test_cpu_run_says_no_nccl_honestly() -> None:
    proof = prove_fabric("", fabric_kind="ethernet", gpu=False, nodes=2)
    assert proof.transport == CPU_TRANSPORT
    assert proof.gdr is None


def test_judged_real_log_is_valid_with_its_metric() -> None:
    _, _, record = paper_record(fixture_text("tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt"))
    assert record.valid, record.findings
    assert record.value == pytest.approx(208.72)
    assert record.config.device == "V100-SXM2-16GB"
    assert record.config.data == "real"  # the paper inventory's run.data_dir: ImageNet TFRecords


@pytest.mark.parametrize(
    ("cpusets", "device"),
    [(None, "cpu"), (["0", "1"], "cpu (1-core nodes)"), (["0-3"], "cpu (4-core nodes)")],
)
def test_a_cpu_runs_device_names_the_nodes_cpu_share(cpusets: list[str] | None, device: str) -> None:
    # runs on 1-core and on 2-core sandbox nodes must not share a 1-device baseline in the report
    inventory = load_inventory(ROOT / "inventories" / "sandbox-example.yml")
    per_node: Sequence[str | None] = cpusets or [None] * 2
    nodes = [n.model_copy(update={"cpuset": c}) for n, c in zip(inventory.nodes, per_node, strict=False)]
    inventory = inventory.model_copy(update={"nodes": nodes})
    workload = get_workload("resnet50")
    plan = build_job(inventory, run_options(inventory, workload.name, nodes=len(nodes)), workload)
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = judge_run(inventory, plan, workload, "", 0, run_id="r", started_at=started)
    assert record.config.device == device


def test_failed_mpirun_is_invalid_with_the_mpi_error() -> None:
    log = fixture_text("mpi_errors/nccl-tests-issue322-test-nccl-failure-mpirun-detected-nonzero.txt")
    _, _, record = paper_record(log, exit_code=3)
    assert not record.valid
    assert "run-failed" in [f.code for f in record.findings]


def test_a_lost_secondary_is_named_by_node_and_address() -> None:
    # the sandbox's own log of a secondary's container killed mid-run, moved to this plan's addresses
    inventory = load_inventory(ROOT / "inventories" / "sandbox-example.yml")
    workload = get_workload("resnet50")
    plan = build_job(inventory, run_options(inventory, workload.name, nodes=2), workload)
    lost = plan.hosts[1]
    log = fixture_text("mpi_errors/clusterctl-sandbox-orte-lost-remote-daemon-container-killed.txt")
    log = log.replace("10.213.218.12", lost.address)
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = judge_run(inventory, plan, workload, log, 205, run_id="r", started_at=started)
    (failed,) = [f for f in record.findings if f.code == "run-failed"]
    assert f"(daemon-lost): mpirun lost its daemon on {lost.node} ({lost.address}):" in failed.message
    assert failed.message.startswith("mpirun exited 205 ")
    through_slurm = judge_run(
        inventory,
        plan,
        workload,
        log,
        205,
        run_id="r",
        started_at=started,
        launcher="slurm",
        starter="the Slurm job",
    )
    (failed,) = [f for f in through_slurm.findings if f.code == "run-failed"]
    assert failed.message.startswith("the Slurm job exited 205 (daemon-lost): ")


def test_run_directory_round_trips_and_never_overwrites(tmp_path: Path) -> None:
    log = fixture_text("tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt")
    inventory, plan, record = paper_record(log)
    from tests.helpers.topology import FIXTURE_NODE, topology_bundle

    topology = {"c4140-1": topology_bundle("c4140-1", FIXTURE_NODE)}
    first = write_run_dir(
        new_run_dir(tmp_path / "runs", record.run_id),
        inventory,
        plan,
        log,
        record,
        bundles={"topology": topology},
    )
    again = new_run_dir(tmp_path / "runs", record.run_id)
    second = write_run_dir(again, inventory, plan, log, record.model_copy(update={"run_id": again.name}))
    with pytest.raises(ValueError, match="written to the run directory"):
        write_run_dir(new_run_dir(tmp_path / "runs", record.run_id), inventory, plan, log, record)
    assert first.name == "20260102T030405Z_tf_cnn_benchmarks_1n"
    assert second.name == "20260102T030405Z_tf_cnn_benchmarks_1n-2"
    assert (first / "topology" / "c4140-1" / "meta.json").is_file()
    assert (first / "output.log").read_text() == log
    assert read_record(first).value == pytest.approx(208.72)
    assert json.loads((first / "spec.json").read_text())["cluster"] == "paper-c4140"


def test_the_judged_record_is_finished_before_its_validity_and_run_id_are_decided() -> None:
    """judge_collected: what the launch collected in, the finished record out (every finding and field
    in it before ``valid`` is decided), and what the run directory keeps."""
    from clusterctl.run.backends import Collected
    from clusterctl.run.judge import judge_collected

    log = fixture_text("tf_cnn_benchmarks/lambda-1x1080ti-tf2.2-resnet50-fp32.txt")
    inventory, plan, _ = paper_record(log)
    collected = Collected(
        log, "mpirun x", telemetry={"c4140-1": "not json\n"}, telemetry_errors={"c4140-1": "lost 2 samples"}
    )
    judged = judge_collected(
        inventory,
        plan,
        get_workload("tf_cnn_benchmarks"),
        collected,
        0,
        run_id="20260102T030405Z_tf_cnn_benchmarks_1n-2",
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        cache_dropped=True,
    )
    record = judged.record
    assert record.run_id == "20260102T030405Z_tf_cnn_benchmarks_1n-2" and record.cache_dropped
    assert record.telemetry_unknown is not None
    assert record.telemetry_unknown["c4140-1"][0] == "sampler: lost 2 samples; not json"
    assert judged.output == log and judged.telemetry == {} and not judged.traces
    assert record.valid
