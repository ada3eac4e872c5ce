"""The run's NCCL log as GPUDirect RDMA's ground truth, on real logs: a peer-memory finding of the
run's topology snapshot is settled by /GDRDMA channels or DMA-BUF, HCAs NCCL disabled GDR on are
named with the reason, and the link layer NCCL listed is checked against the inventory's fabric."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from clusterctl.diagnostics.parsers.peermem import parse_peermem
from clusterctl.diagnostics.rules_node import peermem_rules
from clusterctl.findings import Finding
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.results.nccl_log_proof import fabric_findings, prove_fabric, settle_snapshot
from clusterctl.results.record import RunRecord
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.fixtures import fixture_text
from tests.helpers.nccl_logs import DMABUF, IB_IN_WARN_ONLY, NO_MODULE, ROCE_GDR_OFF, SHARP

ROOT = Path(__file__).resolve().parents[1]
A100_GDR = fixture_text("nccl_logs/nccl-issue707-a100-channels-net-ib-gdrdma-partial.txt")
NO_PEERMEM = parse_peermem(fixture_text("peermem/vm-no-peermem-ls-d-stderr-gdr-cc-paths.txt"))


def _paper() -> Inventory:
    return load_inventory(ROOT / "inventories" / "paper-c4140.yml")


def _snapshot_error(inventory: Inventory) -> list[Finding]:
    """The paper cluster's peer-memory finding from a real probe: an error (NCCL 2.5 has no DMA-BUF)."""
    findings = peermem_rules(inventory.nodes[0], inventory, {"peermem": NO_PEERMEM})
    assert [(f.severity, f.code) for f in findings] == [("error", "peermem-missing")]
    return findings


def _judge(inventory: Inventory, log: str, snapshot: list[Finding]) -> RunRecord:
    workload = get_workload("tf_cnn_benchmarks")
    plan = build_job(inventory, run_options(inventory, workload.name, nodes=2), workload)
    return judge_run(
        inventory,
        plan,
        workload,
        log,
        0,
        run_id="r",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        snapshot=snapshot,
    )


def test_gdrdma_channels_settle_the_snapshots_peermem_error() -> None:
    inventory = _paper()
    snapshot = _snapshot_error(inventory)
    proof = prove_fabric(A100_GDR, fabric_kind="infiniband", gpu=True, nodes=2)
    [settled] = settle_snapshot(snapshot, proof)
    assert (settled.severity, settled.code) == ("info", "peermem-settled-by-log")
    assert "12 of 12 network channels used GDRDMA" in settled.message
    assert settled.node == snapshot[0].node


def test_dmabuf_available_settles_the_snapshots_peermem_error() -> None:
    inventory = _paper()
    proof = prove_fabric(DMABUF, fabric_kind="infiniband", gpu=True, nodes=2)
    assert proof.dmabuf
    [settled] = settle_snapshot(_snapshot_error(inventory), proof)
    assert settled.code == "peermem-settled-by-log" and "DMA-BUF is available" in settled.message


def test_an_unsettled_peermem_error_stays_as_a_warning_of_the_snapshot() -> None:
    inventory = _paper()
    proof = prove_fabric(NO_MODULE, fabric_kind="infiniband", gpu=True, nodes=2)
    [kept] = settle_snapshot(_snapshot_error(inventory), proof)
    assert (kept.severity, kept.code) == ("warning", "peermem-missing")
    assert kept.message.startswith("topology snapshot: ")


def test_the_runs_judgement_takes_the_log_over_the_snapshot() -> None:
    inventory = _paper()
    record = _judge(inventory, A100_GDR, _snapshot_error(inventory))
    by_code = {f.code: f for f in record.findings}
    assert by_code["peermem-settled-by-log"].severity == "info"
    assert "peermem-missing" not in by_code
    # The snapshot's error does not stand for this run (the excerpt has no benchmark lines, so the
    # workload's sanity errors are there: only the fabric's and peer memory's findings are asked about).
    assert not [
        f
        for f in record.findings
        if f.severity == "error" and f.code.startswith(("peermem", "gdr", "fabric"))
    ]
    assert record.fabric.valid


def test_hcas_nccl_disabled_gdr_on_are_named_with_the_reason() -> None:
    proof = prove_fabric(NO_MODULE, fabric_kind="infiniband", gpu=True, nodes=2)
    assert proof.gdr_disabled == {"mlx5_1": "no module", "mlx5_2": "no module", "mlx5_3": "no module"}
    [finding] = [f for f in fabric_findings(proof) if f.code == "gdr-disabled-hca"]
    assert finding.severity == "warning"  # no channel used GDRDMA
    assert "mlx5_1 (no module), mlx5_2 (no module), mlx5_3 (no module)" in finding.message


def test_gdr_disabled_without_a_reason_says_so_in_the_runs_findings() -> None:
    record = _judge(_paper(), ROCE_GDR_OFF, [])
    [finding] = [f for f in record.findings if f.code == "gdr-disabled-hca"]
    assert "mlx5_0 (no reason given), mlx5_1 (no reason given)" in finding.message


def test_roce_listed_on_an_infiniband_inventory_is_a_mismatch() -> None:
    proof = prove_fabric(ROCE_GDR_OFF, fabric_kind="infiniband", gpu=True, nodes=2)
    assert proof.link_layer_mismatch == ["mlx5_0:1 (RoCE)", "mlx5_1:1 (RoCE)"]
    [finding] = [f for f in fabric_findings(proof) if f.code == "fabric-link-layer-mismatch"]
    assert "fabric is infiniband" in finding.message
    assert prove_fabric(ROCE_GDR_OFF, fabric_kind="roce", gpu=True, nodes=2).link_layer_mismatch == []


def test_ib_listed_on_a_roce_inventory_is_a_mismatch_and_ib_on_ib_is_not() -> None:
    assert prove_fabric(SHARP, fabric_kind="roce", gpu=True, nodes=2).link_layer_mismatch == [
        f"mlx5_{i}:1 (IB)" for i in (0, 1, 4, 5)
    ]
    proof = prove_fabric(SHARP, fabric_kind="infiniband", gpu=True, nodes=2)
    assert proof.link_layer_mismatch == [] and proof.network == "IBext"


def test_a_transport_named_only_in_warn_lines_is_the_runs_transport() -> None:
    proof = prove_fabric(IB_IN_WARN_ONLY, fabric_kind="roce", gpu=True, nodes=2)
    assert proof.transport == "NET/IB (named only in WARN lines)"
    assert "fabric-unproven" not in [f.code for f in fabric_findings(proof)]


def test_an_unreadable_snapshot_is_said_in_the_runs_findings() -> None:
    proof = prove_fabric(A100_GDR, fabric_kind="infiniband", gpu=True, nodes=2)
    unreadable = Finding(severity="warning", code="snapshot-unreadable", message="no bundle")
    other = Finding(severity="error", code="pcie-acs-enabled", message="not the run's concern")
    assert settle_snapshot([unreadable, other], proof) == [unreadable]
