"""Host rules from NCCL's troubleshooting (ACS, PCIe links, IOMMU, NVSwitch fabric, IB MTU, HCA count) and
the peer-memory rule as NCCL's gdr.cc decides it, on real captured outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.diagnostics import parse
from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, SectionMeta
from clusterctl.diagnostics.collectors import COLLECTOR_BY_KEY
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.parsers.ibstat import parse_ibstat
from clusterctl.diagnostics.parsers.ibv_devinfo import parse_ibv_devinfo
from clusterctl.diagnostics.parsers.lspci import parse_lspci
from clusterctl.diagnostics.parsers.nvidia_smi_q import parse_nvidia_smi_q
from clusterctl.diagnostics.parsers.ofed_info import parse_ofed_info
from clusterctl.diagnostics.parsers.peermem import parse_peermem
from clusterctl.diagnostics.parsers.proc_cmdline import parse_proc_cmdline
from clusterctl.diagnostics.parsers.proc_modules import parse_proc_modules
from clusterctl.diagnostics.rules import Expectation, apply_rules, ofed_rules
from clusterctl.diagnostics.rules_host import (
    acs_rules,
    hca_count_rules,
    iommu_rules,
    lspci_access_rules,
    mtu_rules,
    pcie_link_rules,
    smi_q_rules,
)
from clusterctl.diagnostics.rules_node import judge_node, peermem_rules
from clusterctl.inventory import load_inventory
from tests.fixtures import fixture_text
from tests.helpers.strictjson import strict_loads

_LSPCI = "lspci_vvv/gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
_IBSTAT_8IB = "ibstat/gpud-h100-8cx7-ib-400-plus-bluefield3-bond-eth.txt"
_INVENTORY = Path(__file__).parent.parent / "inventories" / "modern-h100.yml"
_EXPECT = Expectation(node="n1")


def test_acs_on_a_switch_with_no_gpu_or_hca_below_is_not_reported() -> None:
    """The capture's only redirecting bridges (82:0x.0) serve NVSwitches; the GPU and HCA paths are clean."""
    lspci = parse_lspci(fixture_text(_LSPCI))
    assert [d.bdf for d in lspci.devices if d.acs_redirect]  # there is ACS redirect in the capture ...
    assert acs_rules(lspci, _EXPECT) == []  # ... but not above a GPU or an HCA


def test_acs_lines_without_device_headers_warn_with_their_count() -> None:
    lspci = parse_lspci(
        fixture_text("lspci_vvv/nccl-issue523-grep-acsctl-redirect-enabled-no-device-headers.txt")
    )
    [finding] = acs_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code, finding.node) == ("warning", "pcie-acs-enabled", "n1")
    assert finding.message.startswith("ACS may be enabled: 7 ACSCtl line(s) show ACS controls on")
    assert "5 of them redirecting" in finding.message and "no device headers" in finding.message
    assert "hang" in finding.advice


_GREP_SRCVALID = "lspci_vvv/nccl-issue606-amd-switch-grep-acsctl-srcvalid-only-no-device-headers.txt"
_PLX_EXCERPT = "lspci_vvv/heymeco-issue6-plx-pex8725-excerpt-acs-redirect-no-gpu.txt"


def test_srcvalid_alone_in_grepped_acsctl_lines_says_acs_may_be_enabled() -> None:
    """`lspci -vvv | grep ACSCtl` with SrcValid+ and no redirect (an AMD switch, a hanging NCCL test): NCCL's
    troubleshooting guide reads SrcValid+ as ACS may be enabled; the advice is the BIOS switch or setpci."""
    [finding] = acs_rules(parse_lspci(fixture_text(_GREP_SRCVALID)), _EXPECT)
    assert (finding.severity, finding.code) == ("warning", "pcie-acs-enabled")
    assert finding.message.startswith("ACS may be enabled: 4 ACSCtl line(s) show ACS controls on")
    assert "0 of them redirecting" in finding.message
    assert "BIOS" in finding.advice and "setpci -s <bdf> ECAP_ACS+0x6.w=0000" in finding.advice


def test_an_excerpt_with_a_redirecting_switch_port_and_no_gpu_says_acs_may_be_enabled() -> None:
    """An `lspci -vvv` excerpt that starts inside a PLX port's block (ReqRedir+ CmpltRedir+) and shows no
    GPU or HCA: the tree cannot place the port, the warning says so and asks for the whole output."""
    lspci = parse_lspci(fixture_text(_PLX_EXCERPT))
    assert [d.bdf for d in lspci.devices] == ["0000:02:08.0"] and len(lspci.orphan_acs) == 1
    [finding] = acs_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code) == ("warning", "pcie-acs-enabled")
    assert "1 ACSCtl line(s)" in finding.message and "1 of them redirecting" in finding.message
    assert "the output starts inside a device block" in finding.message
    assert "whole `lspci -vvv`" in finding.advice and "setpci" in finding.advice


def test_an_elided_excerpt_whose_acs_controls_are_all_off_is_fine() -> None:
    """A poster's `[...]` marks the excerpt as partial, but ACSCtl shows every control off: nothing to say."""
    lspci = parse_lspci(fixture_text("lspci_vvv/openvmm-pr3461-root-port-lspci-vv-elided-acs-off.txt"))
    assert lspci.elided == 1 and lspci.unparsed_lines == []
    [port] = lspci.devices
    assert port.acs_ctl is not None and not any(port.acs_ctl.values()) and port.secondary_bus == 1
    assert acs_rules(lspci, _EXPECT) == []


@pytest.mark.parametrize("name", [_GREP_SRCVALID, _PLX_EXCERPT])
def test_inspect_finds_acs_in_grepped_lines_and_excerpts(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(__file__).parent / "fixtures" / name
    assert main(["inspect", str(path), "--json"]) == 0  # a warning: exit 0 unless --strict
    [result] = strict_loads(capsys.readouterr().out)
    assert result["kind"] == "lspci-vvv"
    assert [f["code"] for f in result["findings"]] == ["pcie-acs-enabled"]
    assert main(["inspect", str(path), "--strict"]) == 1


def test_downgraded_links_of_bridges_nvme_and_management_nic_are_not_reported() -> None:
    lspci = parse_lspci(fixture_text(_LSPCI))
    assert any(d.speed_downgraded or d.width_downgraded for d in lspci.devices)
    assert pcie_link_rules(lspci, _EXPECT) == []


def _edit_block(text: str, header: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` inside the lspci device block that starts with ``header``."""
    start = text.index(f"\n{header}") + 1
    end = text.index("\n\n", start)
    assert old in text[start:end]
    return text[:start] + text[start:end].replace(old, new) + text[end:]


def test_acs_redirect_on_the_switch_port_above_a_gpu_is_an_error() -> None:
    """The real capture with one edit: ACS redirect turned on at 17:01.0, the switch port above GPU 19:00.0."""
    clean = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    redirect = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    lspci = parse_lspci(_edit_block(fixture_text(_LSPCI), "17:01.0", clean, redirect))
    [finding] = acs_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code) == ("error", "pcie-acs-enabled")
    assert "GPU 0000:19:00.0" in finding.message and "0000:17:01.0 (ReqRedir/CmpltRedir)" in finding.message


def test_acs_redirect_on_a_root_port_is_not_reported() -> None:
    """Redirect at root port 15:01.0 changes no path: traffic between root ports crosses the root complex anyway."""
    clean = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    redirect = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    lspci = parse_lspci(_edit_block(fixture_text(_LSPCI), "15:01.0", clean, redirect))
    assert next(d for d in lspci.devices if d.bdf == "0000:15:01.0").acs_redirect
    assert acs_rules(lspci, _EXPECT) == []


def test_lspci_without_root_hides_what_the_rules_need() -> None:
    lspci = parse_lspci(
        fixture_text("lspci_vvv/fastfetch-issue1658-h100-nonroot-capabilities-access-denied-partial.txt")
    )
    [gpu] = lspci.devices
    assert gpu.is_gpu and gpu.capabilities_hidden and gpu.link_cap is None and gpu.driver == "nvidia"
    [finding] = lspci_access_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code) == ("warning", "lspci-capabilities-hidden")
    assert "0000:3b:00.0" in finding.message and "root" in finding.advice
    assert lspci_access_rules(parse_lspci(fixture_text(_LSPCI)), _EXPECT) == []  # run as root: all visible


def test_narrow_hca_link_is_an_error() -> None:
    """The real capture with one edit: the ConnectX-7 at 1a:00.0 trained at x8 of its x16."""
    text = _edit_block(fixture_text(_LSPCI), "1a:00.0", "Width x16 (ok)", "Width x8 (downgraded)")
    [finding] = pcie_link_rules(parse_lspci(text), _EXPECT)
    assert (finding.severity, finding.code) == ("error", "pcie-link-downgraded")
    assert (
        "HCA 0000:1a:00.0" in finding.message and "32 GT/s x8" in finding.message and "x16" in finding.message
    )


def test_slow_idle_gpu_link_is_only_a_note() -> None:
    text = _edit_block(fixture_text(_LSPCI), "19:00.0", "Speed 32GT/s (ok)", "Speed 2.5GT/s (downgraded)")
    [finding] = pcie_link_rules(parse_lspci(text), _EXPECT)
    assert (finding.severity, finding.code) == ("info", "pcie-link-downgraded") and "idle" in finding.advice


def test_nvswitch_fabric_completed_or_absent_is_fine() -> None:
    for name in (
        "gpud-8xh100-535.161.08-fabric-completed.txt",
        "gpud-8xrtx4090-535.154.05-fabric-na-idle-gen1.txt",
        "lent-h100-vm-580.159.04-fabric-na-health-block.txt",  # a lone SXM GPU: no fabric to register
    ):
        # The RTX 4090s at PCIe Gen 1 of 4 are idle, not broken: speed is not judged from nvidia-smi -q.
        assert smi_q_rules(parse_nvidia_smi_q(fixture_text(f"nvidia_smi_q/{name}")), _EXPECT) == []


def test_nvswitch_fabric_in_progress_is_an_error() -> None:
    report = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt"))
    [finding] = smi_q_rules(report, _EXPECT)
    assert (finding.severity, finding.code) == ("error", "nvswitch-fabric-not-ready")
    assert "'In Progress'" in finding.message and "nvidia-fabricmanager" in finding.advice


def test_iommu_translating_without_passthrough_warns() -> None:
    assert (
        iommu_rules(
            parse_proc_cmdline(fixture_text("proc_cmdline/rccl-issue1129-ubuntu-iommu-pt.txt")), _EXPECT
        )
        == []
    )
    translated = parse_proc_cmdline(
        fixture_text("proc_cmdline/cn-doc-centos7-dmesg-intel-iommu-on-no-pt.txt")
    )
    [finding] = iommu_rules(translated, _EXPECT)
    assert (finding.severity, finding.code) == (
        "warning",
        "iommu-translating",
    ) and "iommu=pt" in finding.advice


def test_mtu_judges_active_ports_only() -> None:
    down_1024 = parse_ibv_devinfo(
        fixture_text("ibv_devinfo/stelline-puget-connectx7-2port-ethernet-portdown.txt")
    )
    assert {p.active_mtu for d in down_1024.devices for p in d.ports} == {"1024 (3)"}
    assert mtu_rules(down_1024, _EXPECT) == []  # ports down: their MTU is not what NCCL would use
    active = fixture_text("ibv_devinfo/stelline-connectx7-single-port-active-ethernet.txt")
    assert mtu_rules(parse_ibv_devinfo(active), _EXPECT) == []
    # The same capture with the interface MTU left at 1500, which gives RoCE an active_mtu of 1024.
    at_1024 = re.sub(r"(active_mtu:\s+)4096 \(5\)", r"\g<1>1024 (3)", active)
    [finding] = mtu_rules(parse_ibv_devinfo(at_1024), _EXPECT)
    assert (finding.severity, finding.code) == ("warning", "ib-mtu-below-4096") and "4200" in finding.advice


def test_inventory_listing_fewer_hcas_than_the_host_has_up() -> None:
    ibstat = parse_ibstat(fixture_text(_IBSTAT_8IB))
    [finding] = hca_count_rules(ibstat, Expectation(hca=["mlx5_0"], link_layer="InfiniBand"))
    assert (finding.severity, finding.code) == ("warning", "hca-count-below-host")
    assert "mlx5_1, mlx5_4, mlx5_5, mlx5_6, mlx5_7, mlx5_8, mlx5_9" in finding.message
    assert "mlx5_bond_0" not in finding.message  # the 200G Ethernet bond is no compute rail
    every_rail = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert hca_count_rules(ibstat, Expectation(hca=every_rail, link_layer="InfiniBand")) == []
    assert hca_count_rules(ibstat, Expectation(link_layer="InfiniBand")) == []  # no list: NCCL uses all


def test_host_rules_run_with_the_kinds_main_rules() -> None:
    ibstat = parse_ibstat(fixture_text(_IBSTAT_8IB))
    codes = {
        f.code for f in apply_rules("ibstat", ibstat, Expectation(hca="mlx5_0", link_layer="InfiniBand"))
    }
    assert "hca-count-below-host" in codes


def test_ofed_advice_does_not_offer_nvidia_peermem_on_the_inbox_stack() -> None:
    inbox = parse_ofed_info(fixture_text("ofed_info/ompi-issue9957-command-not-found-inbox-rdma-core.txt"))
    [finding] = ofed_rules(inbox, Expectation(link_layer="InfiniBand"))
    assert "or use nvidia_peermem" not in finding.advice
    assert (
        "nvidia_peermem" in finding.advice and "PeerDirect" in finding.advice and "DMA-BUF" in finding.advice
    )


def _node_bundle(outputs: dict[str, str]) -> NodeBundle:
    sections = {
        key: SectionMeta(argv=list(COLLECTOR_BY_KEY[key].argv), status="ok", exit_status=0) for key in outputs
    }
    return NodeBundle(
        meta=NodeMeta(node="h100-1", collected_at="2026-11-22T00:00:00+00:00", sections=sections),
        outputs=outputs,
    )


def test_peermem_as_gdr_cc_checks_it() -> None:
    inventory = load_inventory(_INVENTORY)
    node = inventory.nodes[0]
    absent: dict[str, Parsed] = {
        "peermem": parse_peermem(fixture_text("peermem/vm-no-peermem-ls-d-stderr-gdr-cc-paths.txt"))
    }
    [finding] = peermem_rules(node, inventory, absent)
    # The modern image's NCCL may do DMA-BUF: a warning to confirm, never advice to use the inbox driver.
    assert (finding.severity, finding.code) == ("warning", "peermem-missing")
    assert "inbox" in finding.advice and "not the distribution's inbox" in finding.advice
    # not a file NCCL tests
    legacy_dir: dict[str, Parsed] = {"peermem": parse_peermem("/sys/module/nv_peer_mem\n")}
    assert [f.code for f in peermem_rules(node, inventory, legacy_dir)] == ["peermem-missing"]
    loaded: dict[str, Parsed] = {"peermem": parse_peermem("/sys/kernel/mm/memory_peers/nv_mem/version\n")}
    assert peermem_rules(node, inventory, loaded) == []


def test_check_topology_judges_the_new_outputs_of_a_node() -> None:
    inventory = load_inventory(_INVENTORY)
    node = inventory.nodes[0]
    bundle = _node_bundle(
        {
            "nvidia-smi-q": fixture_text("nvidia_smi_q/gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt"),
            "proc-cmdline": fixture_text("proc_cmdline/cn-doc-centos7-dmesg-intel-iommu-on-no-pt.txt"),
            "lspci-vvv": fixture_text(_LSPCI),
        }
    )
    report = judge_node(inventory, node, bundle)
    codes = {(f.severity, f.code) for f in report.findings}
    assert {("error", "nvswitch-fabric-not-ready"), ("warning", "iommu-translating")} <= codes
    assert not {code for _, code in codes} & {"pcie-acs-enabled", "pcie-link-downgraded"}


def test_rules_never_raise_on_cut_captures() -> None:
    """Every new kind's rules over its captures cut at ten points (a command killed mid-output)."""
    kinds = {
        "lspci_vvv": "lspci-vvv",
        "nvidia_smi_q": "nvidia-smi-q",
        "proc_cmdline": "proc-cmdline",
        "ibv_devinfo": "ibv-devinfo",
        "ibstat": "ibstat",
    }
    expect = Expectation(node="n1", hca=["mlx5_0", "mlx5_1:1"], link_layer="InfiniBand")
    for path in sorted(
        p for folder in kinds for p in (Path(__file__).parent / "fixtures" / folder).glob("*.txt")
    ):
        text = fixture_text(f"{path.parent.name}/{path.name}")
        for tenth in range(1, 11):
            cut = text[: len(text) * tenth // 10]
            findings = apply_rules(kinds[path.parent.name], parse(kinds[path.parent.name], cut), expect)
            assert all(f.node == "n1" for f in findings), path.name


def test_inspect_detects_and_judges_an_acsctl_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "acs.txt"
    raw.write_text(fixture_text("lspci_vvv/nccl-issue523-grep-acsctl-redirect-enabled-no-device-headers.txt"))
    assert main(["inspect", "--json", str(raw)]) == 0  # a warning: exit 0 unless --strict
    [item] = strict_loads(capsys.readouterr().out)
    assert item["kind"] == "lspci-vvv" and [f["code"] for f in item["findings"]] == ["pcie-acs-enabled"]
    assert main(["inspect", "--strict", str(raw)]) == 1


_RTX8000_PART = "lspci_vvv/geerlingguy-rpi-issue480-quadro-rtx8000-partial-no-header-lnksta-downgraded.txt"


def test_a_device_excerpt_without_header_or_lnkcap_still_flags_the_link_lspci_marked_downgraded() -> None:
    lspci = parse_lspci(fixture_text(_RTX8000_PART))
    assert lspci.devices == [] and lspci.error is None
    [finding] = pcie_link_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code, finding.node) == ("warning", "pcie-link-downgraded", "n1")
    assert "Width x1 (downgraded)" in finding.message and "no device headers" in finding.message


def test_a_gpu_block_whose_lnkcap_line_is_missing_is_judged_by_lspcis_own_downgraded_mark() -> None:
    # The real excerpt above, under a real H100 header line (from the fastfetch capture): a user's copy
    # of one device that lost its LnkCap line. x1 where lspci says (downgraded): an error, not idling.
    header = next(
        line
        for line in fixture_text(
            "lspci_vvv/fastfetch-issue1658-h100-nonroot-capabilities-access-denied-partial.txt"
        ).splitlines()
        if line and not line[0].isspace()
    )
    lspci = parse_lspci(header + "\n" + fixture_text(_RTX8000_PART))
    [gpu] = lspci.devices
    assert gpu.is_gpu and gpu.link_cap is None and gpu.width_downgraded
    [finding] = pcie_link_rules(lspci, _EXPECT)
    assert (finding.severity, finding.code) == ("error", "pcie-link-downgraded")
    assert "5 GT/s x1" in finding.message and "LnkCap line is missing" in finding.message


def test_peermem_loaded_but_not_registered_from_real_captures() -> None:
    """A user's pasted `cat` of the memory_peers file (NCCL #1939: nvidia_peermem loaded, no client, NCCL
    logging 'GPU Direct RDMA Disabled') read beside a real `lsmod | grep nvidia` with nvidia_peermem
    loaded (NCCL #1737, another machine: #1939's poster did not paste theirs). The cat capture never
    looked at /sys/module, so only the module list can say the module is loaded: not registered, not
    missing."""
    inventory = load_inventory(_INVENTORY)
    node = inventory.nodes[0]
    cat = fixture_text("peermem/nccl-issue1939-ubuntu24-mofed24.10-peermem-loaded-cat-stderr.txt")
    lsmod = fixture_text("proc_modules/nccl-issue1737-gh200-lsmod-grep-nvidia-peermem-loaded.txt")
    probe, modules = parse_peermem(cat), parse_proc_modules(lsmod)
    assert probe.absent == ["/sys/kernel/mm/memory_peers/nv_mem_nc/version"] and not probe.present
    assert "nvidia_peermem" in modules.modules and "ib_core" in modules.modules and not modules.unparsed_lines
    facts: dict[str, Parsed] = {"peermem": probe, "modules": modules}
    assert [f.code for f in peermem_rules(node, inventory, facts)] == ["peermem-not-registered"]
    # Without the module list the same capture is a missing module: nothing says it is loaded.
    assert [f.code for f in peermem_rules(node, inventory, {"peermem": probe})] == ["peermem-missing"]
    # Registered: the memory_peers client exists, whatever lsmod says.
    registered = parse_peermem(
        "/sys/kernel/mm/memory_peers/nv_mem/version\n/sys/module/nvidia_peermem/version\n"
    )
    assert peermem_rules(node, inventory, {"peermem": registered, "modules": modules}) == []
