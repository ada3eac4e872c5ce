"""GPUDirect RDMA judged as NCCL decides it: per HCA NCCL may use, and by the image's NCCL version."""

from __future__ import annotations

from pathlib import Path

from clusterctl.diagnostics.nccl_gdr import GdrPolicy
from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.diagnostics.rules import Expectation, chosen_nic_rules, expectation_for, topology_rules
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir
from tests.fixtures import fixture_text

_DGX = "nvidia_smi_topo/gengwg-dgx-a100-nv12-12nic-numa.txt"  # 8 GPUs, GPU0/1 PXB to mlx5_0/1, the rest SYS
_A10_SYS = "nvidia_smi_topo/xuesongtap-4xa10-pcie-sys-2nic-niclegend.txt"  # every GPU-NIC path is SYS
_INVENTORIES = Path(__file__).parent.parent / "inventories"


def _by_code(findings: list, code: str) -> list[str]:
    return [f.message.split(":")[0] for f in findings if f.code == code]


def test_gpus_are_judged_against_the_hcas_nccl_may_use() -> None:
    """An 8-rail node restricted to mlx5_0: only the GPUs behind mlx5_0's switch reach it with GDR."""
    topo = parse_nvidia_smi_topo(fixture_text(_DGX))
    findings = topology_rules(topo, Expectation(hca=["mlx5_0"], gdr_level=3, nccl_version="2.18.3"))
    assert _by_code(findings, "gdr-usable") == ["GPU0", "GPU1"]
    assert _by_code(findings, "gdr-not-used-topology") == [f"GPU{i}" for i in range(2, 8)]
    far = next(f for f in findings if f.message.startswith("GPU2:"))
    assert "mlx5_0, is SYS away" in far.message and "NCCL_IB_HCA" in far.advice


def test_gpus_whose_nearest_usable_hca_is_on_another_numa_node_are_warned_about() -> None:
    # the real DGX A100: GPU0/1 (NUMA 3) sit under mlx5_0's switch; GPU2-7 (NUMA 1, 7, 5) reach it across sockets
    topo = parse_nvidia_smi_topo(fixture_text(_DGX))
    (far,) = [f for f in topology_rules(topo, Expectation(hca=["mlx5_0"])) if f.code == "hca-other-numa-node"]
    assert far.severity == "warning"
    assert far.message.startswith(", ".join(f"GPU{i} (mlx5_0)" for i in range(2, 8)) + ": ")
    # every HCA allowed: each GPU has one on its own switch, nothing to say
    assert all(f.code != "hca-other-numa-node" for f in topology_rules(topo, Expectation()))


def test_one_hca_as_a_string_or_with_its_port_is_the_same_list() -> None:
    topo = parse_nvidia_smi_topo(fixture_text(_DGX))
    as_list = topology_rules(topo, Expectation(hca=["mlx5_0"], nccl_version="2.18.3"))
    for setting in ("mlx5_0", "mlx5_0:1"):
        assert topology_rules(topo, Expectation(hca=setting, nccl_version="2.18.3")) == as_list


def test_other_hcas_out_of_gdr_reach_are_named() -> None:
    topo = parse_nvidia_smi_topo(fixture_text(_DGX))
    findings = topology_rules(topo, Expectation(hca=["mlx5_0", "mlx5_2"], nccl_version="2.18.3"))
    gpu0 = next(f for f in findings if f.message.startswith("GPU0:"))
    assert gpu0.code == "gdr-usable" and "to mlx5_0 (PXB); not to mlx5_2 (SYS)" in gpu0.message


def test_nccl_2_5_disables_gdr_at_distance_equal_to_the_level() -> None:
    """NCCL 2.5: SYS is distance 4 and `distance >= level` disables GDR, so level 4 leaves it off."""
    topo = parse_nvidia_smi_topo(fixture_text(_A10_SYS))
    old = topology_rules(topo, Expectation(gdr_level=4, nccl_version="2.5.6"))
    assert {f.code for f in old} == {"gdr-not-used-topology", "hca-other-numa-node"}
    assert "NCCL_NET_GDR_LEVEL=5 (NCCL before 2.6 takes integers only" in old[0].advice
    assert "or 4)" not in old[0].advice
    new = topology_rules(topo, Expectation(gdr_level=4, nccl_version="2.21.5"))
    assert {f.code for f in new} == {"gdr-usable", "hca-other-numa-node"}


def test_unknown_nccl_version_gives_both_forms_of_advice() -> None:
    findings = topology_rules(parse_nvidia_smi_topo(fixture_text(_A10_SYS)), Expectation(gdr_level=3))
    advice = findings[0].advice
    assert "NCCL_NET_GDR_LEVEL=SYS (or 4) on NCCL 2.6 or newer" in advice and "NCCL_NET_GDR_LEVEL=5" in advice
    assert "NCCL version unknown" in findings[0].message


def test_gdr_policy_follows_each_version_of_nccl() -> None:
    # NCCL 2.5 reads NCCL_NET_GDR_LEVEL with strtoll: a name is 0, and GDR is off even on PIX.
    assert not GdrPolicy("2.5.6", "PHB").enabled("PIX", legacy=True)
    assert GdrPolicy("2.5.6", 3).enabled("NODE", legacy=True)  # NODE is a path through one CPU: distance 2
    assert not GdrPolicy("2.5.6", None).enabled("PHB", legacy=True)  # default PHB=2, 2 >= 2
    assert GdrPolicy("2.5.6", None).enabled("PXB", legacy=True)
    # NCCL 2.6+: names work, integers map through levelsOldToNew, `distance > level` disables.
    assert GdrPolicy("2.21.5", "PHB").enabled("NODE", legacy=False)
    assert not GdrPolicy("2.21.5", "PHB").enabled("SYS", legacy=False)
    assert GdrPolicy("2.21.5", 5).enabled("SYS", legacy=False)
    assert not GdrPolicy("2.21.5", None).enabled("PHB", legacy=False)  # default PXB
    assert not GdrPolicy("2.21.5", 0).enabled("PIX", legacy=False)  # 0 is LOC
    assert GdrPolicy("2.5.6", None).legacy and GdrPolicy("2.6.4", None).legacy is False
    assert GdrPolicy(None, None).legacy is None


def test_the_papers_image_is_judged_by_nccl_2_5() -> None:
    inventory = load_inventory(_INVENTORIES / "paper-c4140.yml")
    expect = expectation_for(inventory, inventory.nodes[0])
    assert expect.nccl_version is not None
    assert expect.nccl_version == inventory.image.versions.nccl and expect.nccl_version.startswith("2.5")


def test_gdr_for_sends_needs_nvlink_on_older_gpus_and_nccl() -> None:
    """PCIe-only A10s: NCCL reads GPU memory over GDR (sends) only with NVLink, Ampere+ on NCCL 2.19+, or GDR_READ."""
    pcie = topology_rules(
        parse_nvidia_smi_topo(fixture_text(_A10_SYS)), Expectation(gdr_level=4, nccl_version="2.21.5")
    )
    gdr = [f for f in pcie if f.code == "gdr-usable"]
    assert gdr and all("without NVLink between GPUs sends" in f.message for f in gdr)
    nvlink = topology_rules(parse_nvidia_smi_topo(fixture_text(_DGX)), Expectation(nccl_version="2.21.5"))
    assert [f for f in nvlink if f.code == "gdr-usable"] and not [f for f in nvlink if "sends" in f.message]


def test_each_gpu_is_judged_against_the_nic_its_channels_used() -> None:
    """On a real DGX-1 matrix: GPU0 whose channels went through mlx5_0 (PIX, its nearest) with GDRDMA
    is fine; GPU2 sent through mlx5_0 (PHB) while mlx5_1 is PIX (a rail warning); GPU4 through its
    PIX mlx5_2 but without GDRDMA where the level allows it (a GDR warning); an HCA the log names only
    by index is left unjudged. (The per-GPU NICs are what the NCCL log parser returns, given as values.)"""
    topo = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/msccl-dgx1-8gpu-nv1nv2-4nic-phb.txt"))
    used = {0: ["mlx5_0:1"], 2: ["mlx5_0:1"], 4: ["mlx5_2:1"], 6: ["NET/IB/0"]}
    gdr = {0: True, 2: True, 4: False, 6: False}
    findings = chosen_nic_rules(topo, used, gdr, Expectation(nccl_version="2.18.3", node="n1"))
    assert [(f.code, f.message.split(":")[0]) for f in findings] == [
        ("gpu-nic-not-nearest", "GPU2"),
        ("gdr-not-used-chosen-nic", "GPU4"),
    ]
    assert "mlx5_1 is PIX" in findings[0].message and all(f.node == "n1" for f in findings)


def test_a_runs_chosen_nics_are_judged_on_the_node_the_log_host_names() -> None:
    """The log's host prefix (the host's short hostname) is matched to the snapshot's node."""
    from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta
    from clusterctl.diagnostics.check import chosen_nic_findings

    inventory = load_inventory(data_dir("inventories") / "modern-h100.yml")
    node = inventory.primary.name
    topo = fixture_text("nvidia_smi_topo/msccl-dgx1-8gpu-nv1nv2-4nic-phb.txt")
    bundles = {
        node: NodeBundle(meta=NodeMeta(node=node, collected_at="t"), outputs={"nvidia-smi-topo": topo})
    }
    used = {f"{node}.cluster.example": {2: ["mlx5_0:1"]}, "elsewhere": {2: ["mlx5_0:1"]}}
    findings = chosen_nic_findings(inventory, bundles, used, {})
    assert [(f.code, f.node) for f in findings] == [("gpu-nic-not-nearest", node)]
