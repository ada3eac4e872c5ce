"""Parsers of host facts: topology matrix, ibstat/ibstatus, ibv_devinfo, ofed_info, nvidia-smi."""

from __future__ import annotations

from clusterctl.diagnostics.parsers.ibstat import parse_ibstat
from clusterctl.diagnostics.parsers.ibstatus import parse_ibstatus
from clusterctl.diagnostics.parsers.ibv_devinfo import parse_ibv_devinfo
from clusterctl.diagnostics.parsers.nvidia_smi import parse_nvidia_smi
from clusterctl.diagnostics.parsers.nvidia_smi_csv import parse_nvidia_smi_csv
from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.diagnostics.parsers.ofed_info import parse_ofed_info
from tests.fixtures import fixture_text


def test_topo_nic_legend_resolves_names() -> None:
    topo = parse_nvidia_smi_topo(
        fixture_text("nvidia_smi_topo/stelline-asus-esc8000a-4xrtx6000ada-pcie-4nic-niclegend.txt")
    )
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo.nics == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert topo.matrix["GPU0"]["mlx5_2"] == "SYS"
    assert topo.matrix["mlx5_0"]["mlx5_1"] == "PIX"
    assert topo.cpu_affinity["GPU2"] == "32-63"
    assert topo.numa_affinity["GPU2"] == "1"
    assert topo.gpu_numa_id["GPU0"] == "N/A"
    assert topo.nearest_nic("GPU2") == ("mlx5_2", "NODE")


def test_topo_direct_nic_columns_and_nvlink() -> None:
    topo = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/gengwg-dgx-a100-nv12-12nic-numa.txt"))
    assert len(topo.gpus) == 8 and len(topo.nics) == 12
    assert topo.matrix["GPU0"]["GPU1"] == "NV12"
    assert topo.matrix["GPU4"]["mlx5_6"] == "PXB"
    assert topo.numa_affinity["GPU4"] == "7"
    assert topo.unparsed_lines == []


def test_topo_legacy_soc_legend_without_numa() -> None:
    topo = parse_nvidia_smi_topo(
        fixture_text("nvidia_smi_topo/microway-copy-2xk80-mlx4-legacy-soc-legend.txt")
    )
    assert topo.nics == ["mlx4_0"]
    assert "SOC" in topo.legend
    assert topo.numa_affinity == {}
    assert topo.matrix["GPU0"]["GPU1"] == "PIX"


def test_topo_escape_codes_and_single_gpu_na() -> None:
    three = parse_nvidia_smi_topo(
        fixture_text("nvidia_smi_topo/siboehm-3xrtxa6000-partial-nvlink-nv4-node.txt")
    )
    assert three.gpus == ["GPU0", "GPU1", "GPU2"]
    assert three.matrix["GPU0"]["GPU1"] == "NV4"
    one = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/hami-pr99-single-tesla-p4-numa-na.txt"))
    assert one.gpus == ["GPU0"] and one.numa_affinity == {"GPU0": "N/A"}


def test_topo_error_instead_of_table() -> None:
    topo = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/aiperf-issue8-topo-m-dash-i-error.txt"))
    assert topo.gpus == []
    assert topo.error is not None and "-i command line argument" in topo.error


def test_ibstat_down_port_and_rates() -> None:
    report = parse_ibstat(
        fixture_text(
            "ibstat/nccl-tests-issue128-cx6-mt4123-active200-down-disabled-rate10-plus-cx4lx-partial.txt"
        )
    )
    assert [ca.name for ca in report.cas] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert report.cas[0].type == "MT4123" and report.cas[0].firmware == "20.33.1048"
    first, second = report.cas[0].ports[0], report.cas[1].ports[0]
    assert (first.state, first.physical_state, first.rate, first.link_layer) == (
        "Active",
        "LinkUp",
        200.0,
        "InfiniBand",
    )
    assert (second.state, second.physical_state, second.rate) == ("Down", "Disabled", 10.0)


def test_ibstat_rate_with_suffix() -> None:
    report = parse_ibstat(fixture_text("ibstat/felixfu-connectx3-mt4099-1port-rate-40-fdr10.txt"))
    assert report.cas[0].ports[0].rate == 40.0


def test_ibstatus_normalises_states() -> None:
    report = parse_ibstatus(fixture_text("ibstatus/heioy-connectx3-mlx4_0-2port-fdr.txt"))
    assert len(report.cas) == 1 and len(report.cas[0].ports) == 2
    port = report.cas[0].ports[1]
    assert (port.port, port.state, port.physical_state, port.rate) == (2, "Active", "LinkUp", 56.0)


def test_ibv_devinfo_old_format_two_devices() -> None:
    info = parse_ibv_devinfo(fixture_text("ibv_devinfo/heioy-2x-connectx3-4099-port2-down.txt"))
    assert [d.name for d in info.devices] == ["mlx4_1", "mlx4_0"]
    assert info.devices[0].fw_ver == "2.42.5000"
    assert [(p.port, p.state) for p in info.devices[0].ports] == [(1, "PORT_ACTIVE"), (2, "PORT_DOWN")]


def test_ibv_devinfo_ethernet_and_partial() -> None:
    eth = parse_ibv_devinfo(fixture_text("ibv_devinfo/stelline-connectx7-single-port-active-ethernet.txt"))
    assert eth.devices[0].ports[0].link_layer == "Ethernet"
    partial = parse_ibv_devinfo(
        fixture_text("ibv_devinfo/ompi-issue9957-connectx4-vv-partial-no-port-section.txt")
    )
    assert partial.devices[0].fw_ver == "12.20.1820" and partial.devices[0].ports == []


def test_ofed_info_forms() -> None:
    short = parse_ofed_info(fixture_text("ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"))
    assert (short.installed, short.version, short.flavor) == (True, "4.7-1.0.0.1", "MLNX_OFED_LINUX")
    head = parse_ofed_info(fixture_text("ofed_info/nvpeermem-issue43-full-ofed_info-head1-4.4.txt"))
    assert head.version == "4.4-1.0.0.0"
    number = parse_ofed_info(fixture_text("ofed_info/nvpeermem-issue79-ofed_info-n-5.0.txt"))
    assert number.version == "5.0-2.1.8" and number.flavor is None
    missing = parse_ofed_info(fixture_text("ofed_info/ompi-issue9957-command-not-found-inbox-rdma-core.txt"))
    assert missing.installed is False and missing.version is None


def test_nvidia_smi_table_versions_and_gpus() -> None:
    smi = parse_nvidia_smi(fixture_text("nvidia_smi/gpud-8xh100-550.90.07.txt"))
    assert (smi.driver_version, smi.cuda_version) == ("550.90.07", "12.4")
    assert len(smi.gpus) == 8
    assert smi.gpus[7].bus_id == "00000000:DB:00.0"
    assert smi.gpus[0].memory_total_mib == 81559
    mismatch = parse_nvidia_smi(
        fixture_text("nvidia_smi/inference-snaps-issue89-smi470-vs-driver580-mismatch-partial.txt")
    )
    assert (mismatch.smi_version, mismatch.driver_version) == ("470.256.02", "580.95.05")


def test_nvidia_smi_csv_header_units_and_errors() -> None:
    csv = parse_nvidia_smi_csv(fixture_text("nvidia_smi_query_csv/xuesongtap-lms-timestamp-pstate-mem.txt"))
    assert "memory.total" in csv.fields and len(csv.rows) == 5
    assert csv.rows[0]["memory.total"] == "23028 MiB"
    error = parse_nvidia_smi_csv(
        fixture_text("nvidia_smi_query_csv/inference-snaps-issue89-compute-cap-invalid-field-error.txt")
    )
    assert error.rows == [] and error.error is not None
    named = parse_nvidia_smi_csv("440.64, GeForce RTX 2080\n", fields=["driver_version", "name"])
    assert named.rows == [{"driver_version": "440.64", "name": "GeForce RTX 2080"}]
