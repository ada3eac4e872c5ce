"""Fabric proof on real NCCL logs: which HCAs the network channels went through, and whether they
used GPUDirect RDMA, judged against the inventory's rails and GDR level."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterctl.diagnostics.parsers.nccl_log import parse_nccl_log
from clusterctl.inventory import load_inventory
from clusterctl.results.nccl_log_proof import fabric_findings, prove_fabric
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.fixtures import fixture_text

ROOT = Path(__file__).resolve().parents[1]
# 9 RoCE HCAs listed; this excerpt's channels go through NET/IB/4 and NET/IB/8 only, no GDRDMA.
H200_TWO_OF_NINE = fixture_text("nccl_logs/deepep-issue143-h200-9x-roce-listed-2-used-no-gdrdma-partial.txt")
H200_HCAS = [f"mlx5_{i}" for i in range(9)]
# Channels only (no Using line), every one /GDRDMA, over devices 5, 2, 0, 4.
A100_GDR = fixture_text("nccl_logs/nccl-issue707-a100-channels-net-ib-gdrdma-partial.txt")
# 8 RoCE bonds listed, the IBext_v8 plugin's channels use 4 of them, no GDRDMA.
BONDS_PLUGIN = fixture_text("nccl_logs/nccl-issue1814-8x-roce-bond-ibext-plugin-channels-partial.txt")
# No host prefix on the lines; one HCA, ring lines without GDRDMA.
NO_HOST = fixture_text("nccl_logs/nccl-issue392-roce-gid3-ring-net-ib-no-gdrdma-no-host-prefix-partial.txt")


def _codes(proof) -> list[str]:
    return [f.code for f in fabric_findings(proof)]


# --------------------------------------------------------------------------- the parser


def test_channels_name_the_hcas_of_their_hosts_using_line() -> None:
    log = parse_nccl_log(H200_TWO_OF_NINE)
    assert log.hcas == [f"{h}:1" for h in H200_HCAS]
    assert log.hcas_used == {"msm-h200-2": ["mlx5_8:1", "mlx5_4:1"]}
    assert (log.net_channels, log.gdr_channels) == (4, 0)
    assert log.unparsed_lines == []


def test_a_net_plugins_channels_are_named_from_the_same_list() -> None:
    log = parse_nccl_log(BONDS_PLUGIN)
    assert log.transport == "IB"
    assert log.hcas_used == {
        "hostname-test": ["mlx5_bond_1:1", "mlx5_bond_3:1", "mlx5_bond_6:1", "mlx5_bond_2:1"]
    }
    assert log.net_channels == 13 and log.gdr_channels == 0


def test_channels_without_a_using_line_keep_their_device_index() -> None:
    log = parse_nccl_log(A100_GDR)
    assert log.transport == "IB"
    assert log.hcas_used == {"10-90-43-152": ["NET/IB/5", "NET/IB/2", "NET/IB/0", "NET/IB/4"]}
    assert log.net_channels == log.gdr_channels == 12


def test_lines_without_a_host_prefix_still_count() -> None:
    log = parse_nccl_log(NO_HOST)
    assert log.hcas_used == {"": ["mlx5_0:1"]}
    assert (log.net_channels, log.gdr_channels) == (2, 0)


# --------------------------------------------------------------------------- rails


def test_fewer_hcas_used_than_the_inventory_lists_is_a_warning() -> None:
    proof = prove_fabric(H200_TWO_OF_NINE, fabric_kind="roce", gpu=True, nodes=2, hcas=H200_HCAS)
    assert proof.valid
    assert proof.rails_short == {
        "msm-h200-2": "2 of 9 (mlx5_8:1, mlx5_4:1); unused: mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_5, mlx5_6, mlx5_7"
    }
    (finding,) = [f for f in fabric_findings(proof) if f.code == "fabric-rails-unused"]
    assert finding.severity == "warning" and finding.node == "msm-h200-2"
    assert "used 2 of 9" in finding.message


def test_unnamed_devices_are_counted_not_named() -> None:
    hcas = [f"mlx5_{i}" for i in range(8)]
    proof = prove_fabric(A100_GDR, fabric_kind="infiniband", gpu=True, nodes=2, hcas=hcas)
    assert proof.rails_short == {"10-90-43-152": "4 of 8 (NET/IB/5, NET/IB/2, NET/IB/0, NET/IB/4)"}


@pytest.mark.parametrize(
    ("hcas", "ranks_per_node", "nodes"),
    [
        (H200_HCAS[:2], None, 2),  # the inventory lists the two that were used
        (H200_HCAS, 2, 2),  # two ranks per node: one rail each
        (H200_HCAS, None, 1),  # one node: no network to prove
        (["mlx5_0"], None, 2),  # one rail
    ],
)
def test_rails_are_not_flagged_when_every_expected_rail_was_used(
    hcas: list[str], ranks_per_node: int | None, nodes: int
) -> None:
    proof = prove_fabric(
        H200_TWO_OF_NINE, fabric_kind="roce", gpu=True, nodes=nodes, hcas=hcas, ranks_per_node=ranks_per_node
    )
    assert proof.rails_short == {}
    assert "fabric-rails-unused" not in _codes(proof)


# --------------------------------------------------------------------------- GPUDirect RDMA


def test_gdr_level_set_without_any_gdrdma_channel_is_a_warning() -> None:
    proof = prove_fabric(NO_HOST, fabric_kind="roce", gpu=True, nodes=2, gdr_level=3)
    assert proof.gdr_missing and proof.valid
    (finding,) = [f for f in fabric_findings(proof) if f.code == "gdr-not-used"]
    assert finding.severity == "warning"
    assert "none of the 2 network channels says GDRDMA" in finding.message


@pytest.mark.parametrize(
    ("log", "gdr_level"),
    [(A100_GDR, 3), (NO_HOST, None), (NO_HOST, 0)],
    ids=["gdrdma-used", "no-level-set", "level-LOC"],
)
def test_gdr_is_not_flagged_when_used_or_not_asked_for(log: str, gdr_level: int | None) -> None:
    proof = prove_fabric(log, fabric_kind="infiniband", gpu=True, nodes=2, gdr_level=gdr_level)
    assert not proof.gdr_missing
    assert "gdr-not-used" not in _codes(proof)


# --------------------------------------------------------------------------- the run's judgement


def test_modern_h100_run_over_half_its_rails_without_gdrdma_is_flagged() -> None:
    inventory = load_inventory(ROOT / "inventories" / "modern-h100.yml")
    workload = get_workload("resnet50")
    plan = build_job(inventory, run_options(inventory, workload.name, nodes=2), workload)
    record = judge_run(
        inventory,
        plan,
        workload,
        BONDS_PLUGIN,
        0,
        run_id="r",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    codes = [f.code for f in record.findings]
    assert "fabric-rails-unused" in codes and "gdr-not-used" in codes
    assert record.fabric.rails_short["hostname-test"].startswith("4 of 8 ")
    assert record.fabric.valid  # warnings: the transport was RDMA as the inventory says
