"""Parsers of the host facts NCCL's troubleshooting needs: lspci -vvv, nvidia-smi -q, perfquery -x and
sysfs port counters, /proc/cmdline, DOCA-era ofed_info -s, and the peer-memory probe."""

from __future__ import annotations

from clusterctl.diagnostics.parsers.lspci import parse_lspci
from clusterctl.diagnostics.parsers.nvidia_smi_q import parse_nvidia_smi_q
from clusterctl.diagnostics.parsers.ofed_info import parse_ofed_info
from clusterctl.diagnostics.parsers.peermem import PEERMEM_PATHS, parse_peermem
from clusterctl.diagnostics.parsers.port_counters import parse_perfquery, parse_sysfs_counters
from clusterctl.diagnostics.parsers.proc_cmdline import parse_proc_cmdline
from tests.fixtures import fixture_text

_LSPCI = "lspci_vvv/gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
_LSPCI_GREP = "lspci_vvv/nccl-issue523-grep-acsctl-redirect-enabled-no-device-headers.txt"


def test_lspci_devices_links_and_hierarchy() -> None:
    lspci = parse_lspci(fixture_text(_LSPCI))
    by_bdf = {d.bdf: d for d in lspci.devices}
    gpu, hca = by_bdf["0000:19:00.0"], by_bdf["0000:1a:00.0"]
    assert gpu.is_gpu and not gpu.is_hca and hca.is_hca and not hca.is_gpu
    assert gpu.link_cap is not None and gpu.link_sta is not None
    assert (gpu.link_cap.speed_gts, gpu.link_cap.width, gpu.link_sta.speed_gts) == (32.0, 16, 32.0)
    assert not gpu.speed_downgraded and not gpu.width_downgraded
    # The bridges above the GPU, nearest first: switch downstream port, switch upstream port, root port.
    assert [b.bdf for b in lspci.bridges_above(gpu)] == ["0000:17:01.0", "0000:16:00.0", "0000:15:01.0"]
    assert by_bdf["0000:15:01.0"].port_type == "Root Port"
    # A Gen5 switch port that trained at Gen4 for the NVMe behind it, and the management NIC's x1 link.
    switch_port = by_bdf["0000:17:00.0"]
    assert switch_port.speed_downgraded
    assert switch_port.link_sta is not None and switch_port.link_sta.speed_gts == 16.0
    assert by_bdf["0000:01:00.0"].width_downgraded and not by_bdf["0000:01:00.0"].is_hca
    assert by_bdf["0000:82:00.0"].acs_redirect == ["ReqRedir", "CmpltRedir"]
    root_port = by_bdf["0000:00:0c.0"]
    assert root_port.acs_ctl is not None and root_port.acs_ctl["SrcValid"] and not root_port.acs_redirect
    assert lspci.unparsed_lines == [] and lspci.error is None


def test_lspci_acsctl_lines_without_devices() -> None:
    lspci = parse_lspci(fixture_text(_LSPCI_GREP))
    assert lspci.devices == [] and len(lspci.orphan_acs) == 12
    assert sum(1 for flags in lspci.orphan_acs if flags["ReqRedir"]) == 5
    assert parse_lspci("pcilib: Cannot open /proc/bus/pci\n").error == "pcilib: Cannot open /proc/bus/pci"


def test_nvidia_smi_q_fabric_and_links() -> None:
    report = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gpud-8xh100-535.161.08-fabric-completed.txt"))
    assert report.driver_version == "535.161.08" and report.attached_gpus == 8 and len(report.gpus) == 8
    first = report.gpus[0]
    assert first.bus_id == "00000000:19:00.0" and first.product_name == "NVIDIA H100 80GB HBM3"
    assert (first.fabric_state, first.fabric_status) == ("Completed", "Success")
    assert (first.pcie_gen_max, first.pcie_gen_current, first.pcie_width_max, first.pcie_width_current) == (
        5,
        5,
        16,
        16,
    )
    assert report.unparsed_lines == []


def test_nvidia_smi_q_fabric_na_and_idle_generation() -> None:
    report = parse_nvidia_smi_q(
        fixture_text("nvidia_smi_q/gpud-8xrtx4090-535.154.05-fabric-na-idle-gen1.txt")
    )
    idle, busy = report.gpus[0], report.gpus[1]
    assert idle.fabric_state is None and idle.fabric_status is None  # N/A: no NVSwitch
    assert (idle.performance_state, idle.pcie_gen_current, idle.pcie_gen_max) == ("P8", 1, 4)
    assert (busy.performance_state, busy.pcie_gen_current) == ("P2", 4)


def test_nvidia_smi_q_grep_excerpt_of_a_stuck_fabric() -> None:
    report = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt"))
    assert len(report.gpus) == 1 and report.gpus[0].bus_id is None
    assert report.gpus[0].fabric_state == "In Progress" and report.gpus[0].fabric_status is None


def test_perfquery_extended_counters_in_bytes() -> None:
    counters = parse_perfquery(fixture_text("perfquery/infiniband-exporter-2port-extended.txt"))
    assert [(p.port, p.lid, p.extended) for p in counters.ports] == [(1, 1719, True), (2, 1719, True)]
    assert counters.ports[0].counters["PortXmitData"] == 36298026860928
    assert counters.ports[0].xmit_bytes == 4 * 36298026860928
    assert counters.ports[1].rcv_bytes == 4 * 39078804993378
    assert counters.error is None and counters.unparsed_lines == []
    failed = parse_perfquery("ibwarn: [3245] mad_rpc_open_port: can't open UMAD port ((null):0)\n")
    assert failed.ports == [] and failed.error is not None and "UMAD" in failed.error


def test_sysfs_counters_per_device_and_port() -> None:
    counters = parse_sysfs_counters(fixture_text("sysfs_counters/gpud-h100-8ib-bond-port-data-grep.txt"))
    names = [p.device for p in counters.ports]
    assert names == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_7",
        "mlx5_8",
        "mlx5_9",
        "mlx5_bond_0",
    ]
    mlx5_1 = counters.ports[1]
    assert mlx5_1.xmit_bytes == 4 * 230442669431839 and mlx5_1.rcv_bytes == 4 * 205128687774249
    missing = parse_sysfs_counters(
        "grep: /sys/class/infiniband/*/ports/*/counters/port_xmit_data: No such file or directory\n"
    )
    assert missing.ports == [] and missing.error is not None


def test_proc_cmdline_iommu_modes() -> None:
    passthrough = parse_proc_cmdline(fixture_text("proc_cmdline/rccl-issue1129-ubuntu-iommu-pt.txt"))
    assert (
        passthrough.args["iommu"] == "pt"
        and passthrough.args["ro"] == ""
        and passthrough.iommu_mode == "passthrough"
    )
    translated = parse_proc_cmdline(
        fixture_text("proc_cmdline/cn-doc-centos7-dmesg-intel-iommu-on-no-pt.txt")
    )
    assert translated.args["intel_iommu"] == "on" and translated.iommu_mode == "translated"
    assert parse_proc_cmdline("cat: /proc/cmdline: No such file or directory\n").error is not None


def test_ofed_info_doca_formats() -> None:
    first = parse_ofed_info(fixture_text("ofed_info/exa-doc-doca-ofed-internal-24.10-1.1.4.0.200-s.txt"))
    assert (first.installed, first.flavor, first.version) == (True, "OFED-internal", "24.10-1.1.4.0.200")
    second = parse_ofed_info(fixture_text("ofed_info/exa-doc-doca-ofed-internal-24.10-2.1.8-rocky8-s.txt"))
    assert (second.flavor, second.version, second.unparsed_lines) == ("OFED-internal", "24.10-2.1.8", [])
    mlnx = parse_ofed_info(fixture_text("ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"))
    assert (mlnx.flavor, mlnx.version) == ("MLNX_OFED_LINUX", "4.7-1.0.0.1")


def test_peermem_probe_uses_the_paths_nccl_tests() -> None:
    assert PEERMEM_PATHS == (
        "/sys/kernel/mm/memory_peers/nv_mem/version",
        "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        "/sys/module/nvidia_peermem/version",
    )
    absent = parse_peermem(fixture_text("peermem/vm-no-peermem-ls-d-stderr-gdr-cc-paths.txt"))
    assert absent.absent == list(PEERMEM_PATHS) and not absent.loaded
    assert parse_peermem("/sys/kernel/mm/memory_peers/nv_mem_nc/version\n").loaded
    # The legacy module's directory is not what NCCL tests: its memory_peers client is.
    assert not parse_peermem("/sys/module/nv_peer_mem\n").loaded


def test_nvidia_smi_q_driver_580_layout() -> None:
    """Driver 580 widens the key column and nests a Health block under Fabric; a lone SXM GPU has no fabric."""
    report = parse_nvidia_smi_q(
        fixture_text("nvidia_smi_q/lent-h100-vm-580.159.04-fabric-na-health-block.txt")
    )
    [gpu] = report.gpus
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == ("580.159.04", "13.0", 1)
    assert gpu.bus_id == "00000000:00:06.0" and gpu.product_name == "NVIDIA H100 80GB HBM3"
    assert gpu.fabric_state is None and gpu.attributes["Fabric/Health/Summary"] == "N/A"
    assert (gpu.pcie_gen_current, gpu.pcie_width_current) == (5, 16)
    assert gpu.attributes["PCI/GPU Link Info/PCIe Generation/Host Max"] == "N/A"
    assert report.unparsed_lines == []
