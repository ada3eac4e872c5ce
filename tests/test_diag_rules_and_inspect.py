"""Rules (port down, slow port, GDR across sockets) and the `inspect` command."""

from __future__ import annotations

from clusterctl.cli import main
from clusterctl.diagnostics.parsers.ibstat import parse_ibstat
from clusterctl.diagnostics.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.diagnostics.rules import Expectation, ib_rules, topology_rules, version_rules
from tests.fixtures import FIXTURES, fixture_text
from tests.helpers.strictjson import strict_loads

_IBSTAT_DOWN = "ibstat/nccl-tests-issue128-cx6-mt4123-active200-down-disabled-rate10-plus-cx4lx-partial.txt"
_TOPO_SYS = "nvidia_smi_topo/xuesongtap-4xa10-pcie-sys-2nic-niclegend.txt"

_SLOW_PORT = """CA 'mlx5_0'
\tCA type: MT4115
\tFirmware version: 12.28.2006
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 10
\t\tLink layer: InfiniBand
"""


def test_down_port_is_an_error_on_the_used_hca() -> None:
    findings = ib_rules(parse_ibstat(fixture_text(_IBSTAT_DOWN)), Expectation(node="n1", hca="mlx5_1"))
    down = [f for f in findings if f.code == "ib-port-down"]
    assert len(down) == 1 and down[0].severity == "error" and "mlx5_1 port 1" in down[0].message
    assert down[0].node == "n1"


def test_down_port_on_another_hca_is_info() -> None:
    findings = ib_rules(parse_ibstat(fixture_text(_IBSTAT_DOWN)), Expectation(hca="mlx5_0"))
    assert [f.severity for f in findings if f.code == "ib-port-down"] == ["info"]


def test_inventory_hca_absent_from_the_host_is_an_error() -> None:
    report = parse_ibstat(fixture_text(_IBSTAT_DOWN))
    findings = ib_rules(report, Expectation(node="n1", hca="mlx5_7"))
    absent = [f for f in findings if f.code == "hca-not-found"]
    assert len(absent) == 1 and absent[0].severity == "error" and absent[0].node == "n1"
    assert "mlx5_7" in absent[0].message and "mlx5_1" in absent[0].message
    assert not [f for f in ib_rules(report, Expectation(hca="mlx5_1")) if f.code == "hca-not-found"]


def test_10g_port_where_100_expected() -> None:
    findings = ib_rules(parse_ibstat(_SLOW_PORT), Expectation(rate_gbps=100, link_layer="InfiniBand"))
    assert [f.code for f in findings] == ["ib-rate-below-expected"]
    assert "10 Gb/s" in findings[0].message and "100 Gb/s" in findings[0].message


def test_ethernet_where_infiniband_expected() -> None:
    findings = ib_rules(
        parse_ibstat(_SLOW_PORT.replace("InfiniBand", "Ethernet")), Expectation(link_layer="InfiniBand")
    )
    assert [f.code for f in findings] == ["ib-link-layer-unexpected"]


def test_gpu_whose_nearest_nic_is_sys_gets_gdr_advice() -> None:
    topo = parse_nvidia_smi_topo(fixture_text(_TOPO_SYS))
    findings = topology_rules(topo, Expectation(gdr_level=3, nccl_version="2.18.3"))
    warnings = [f for f in findings if f.code == "gdr-not-used-topology"]
    assert len(warnings) == 4
    assert "SYS" in warnings[0].message and "NCCL_NET_GDR_LEVEL=3" in warnings[0].message
    assert "NCCL_NET_GDR_LEVEL=SYS (or 4)" in warnings[0].advice and "inter-socket" in warnings[0].advice


def test_gpu_with_nic_behind_its_switch_uses_gdr() -> None:
    topo = parse_nvidia_smi_topo(fixture_text("nvidia_smi_topo/gengwg-dgx-a100-nv12-12nic-numa.txt"))
    findings = topology_rules(topo, Expectation(gdr_level=3))
    assert {f.code for f in findings} == {"gdr-usable"}
    assert len(findings) == 8


def test_versions_differ_between_nodes() -> None:
    findings = version_rules("ofed", {"n1": "4.7-3.2.9.0", "n2": "5.0-2.1.8.0"}, expected="4.7")
    assert [f.code for f in findings] == ["ofed-version-mismatch", "ofed-version-unexpected"]
    assert findings[1].node == "n2"
    assert version_rules("ofed", {"n1": "4.7", "n2": "4.7"}) == []


def test_inspect_json_array_and_exit_code(capsys) -> None:
    files = [
        str(FIXTURES / _IBSTAT_DOWN),
        str(FIXTURES / "ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"),
    ]
    code = main(["inspect", "--json", *files])
    out = strict_loads(capsys.readouterr().out)
    assert code == 1
    assert [item["kind"] for item in out] == ["ibstat", "ofed-info"]
    assert set(out[0]) == {"schema", "file", "kind", "parsed", "findings", "unparsed_lines", "also_read_as"}
    assert out[0]["parsed"]["cas"][1]["ports"][0]["state"] == "Down"
    assert out[0]["findings"][0]["code"] == "ib-port-down"
    assert out[1]["parsed"]["version"] == "4.7-1.0.0.1"


def test_inspect_strict_turns_warnings_into_failure(capsys) -> None:
    topo = str(FIXTURES / _TOPO_SYS)
    assert main(["inspect", topo, "--gdr-level", "3"]) == 0
    assert main(["inspect", topo, "--gdr-level", "3", "--strict"]) == 1
    assert "GPU0" in capsys.readouterr().out


def test_inspect_bad_kind_and_missing_file(tmp_path) -> None:
    assert main(["inspect", "--kind", "bogus", str(FIXTURES / _TOPO_SYS)]) == 2
    assert main(["inspect", str(tmp_path / "absent.txt")]) == 2


def test_inspect_forced_kind_on_raw_file(tmp_path, capsys) -> None:
    raw = tmp_path / "ibstat.txt"
    raw.write_text(_SLOW_PORT)
    assert main(["inspect", "--json", "--kind", "ibstat", "--expected-rate", "100", str(raw)]) == 1
    assert strict_loads(capsys.readouterr().out)[0]["findings"][0]["code"] == "ib-rate-below-expected"
