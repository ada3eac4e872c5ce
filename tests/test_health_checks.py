"""`check health` on fixture bundles: real captured outputs (Xids, a pending row remap, a PCIe link at
half width, a port whose link went down between two reads) give the right finding, node and action;
a node whose checks could not look is unknown, never healthy. No host is contacted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clusterctl.check.drain import MAX_REASON, REASON_PREFIX, SlurmAction, drain_reason, update_argv
from clusterctl.cli import main
from clusterctl.diagnostics import parse
from clusterctl.diagnostics.bundle import write_bundle
from clusterctl.diagnostics.health import _KERNEL_LOG, judge_health
from clusterctl.diagnostics.parsers.kernel_log import KernelLog, parse_kernel_log
from clusterctl.diagnostics.parsers.nvidia_smi_q import NvidiaSmiQ
from clusterctl.diagnostics.parsers.port_counters import PortCounters
from clusterctl.diagnostics.rules_health import port_error_rules, smi_health_rules, xid_rules
from clusterctl.inventory import load_inventory
from tests.fixtures import fixture_text
from tests.helpers.health import COUNTERS, HEALTHY, HEALTHY_SMI, INVENTORY, REMAP, XID79, health_bundle
from tests.helpers.strictjson import strict_loads

XID119 = "kernel_log/gpud-xid119-gsp-rpc-timeout-ctime.txt"
SLOWED = "nvidia_smi_q/gpud-8gpu-535.183.01-power-brake-thermal-slowdown.txt"
LSPCI_X8 = "lspci_vvv/fah-readme-2x-rtx2060-width-x8-downgraded-grep-gt.txt"
COUNTERS_FLAPPED = "sysfs_counters/constructed-h100-second-read-mlx5_0-link-downed-plus-1.txt"


def test_kernel_log_reads_xid_and_sxid_lines_and_skips_the_rest() -> None:
    log = parse_kernel_log(fixture_text(XID79))
    assert [(e.kind, e.code, e.device) for e in log.events[:2]] == [
        ("xid", 79, "0000:91:00"),
        ("sxid", 20034, "0000:06:00.0"),
    ]
    assert log.events[0].detail == "GPU has fallen off the bus."
    assert log.events[1].fatal and not log.events[3].fatal  # "Data {...}" continuation is not fatal
    gsp = parse_kernel_log(fixture_text(XID119))  # dmesg --ctime stamps; the RPC history dump is no event
    assert {(e.code, e.device) for e in gsp.events} == {(119, "0000:9b:00")}
    assert gsp.events[0].stamp == "Sun Feb 23 16:24:18 2025" and gsp.events[0].detail.startswith("Timeout")


def test_xid_rules_give_one_finding_per_code_and_device_with_the_action() -> None:
    findings = xid_rules(parse_kernel_log(fixture_text(XID79)), "hgx-02")
    by_code = {(f.code, f.message.split(" on ")[1].split()[1]): f for f in findings}
    xid = by_code[("xid-79", "0000:91:00")]
    assert xid.severity == "error" and xid.node == "hgx-02"
    assert xid.advice.startswith("Drain the node and reboot it")
    fatal = [f for f in findings if f.code == "sxid-20034"]
    assert len(fatal) == 3 and all(f.severity == "error" and "fatal" in f.message for f in fatal)
    assert all("Fatal, Link" in f.message for f in fatal)  # the fatal line, not the "Data {...}" one


def test_remapped_rows_pending_is_an_error_telling_to_drain_and_reset() -> None:
    smi = parse("nvidia-smi-q", fixture_text(REMAP))
    assert isinstance(smi, NvidiaSmiQ)
    [finding] = smi_health_rules(smi, "n1")
    assert (finding.severity, finding.code) == ("error", "gpu-row-remap-pending")
    assert "GPU 00000000:07:00.0" in finding.message and "4 rows" in finding.message
    assert finding.advice.startswith("Drain the node, then reset the GPU")


def test_clock_slowdowns_name_the_gpu_and_the_reason_and_idle_is_fine() -> None:
    smi = parse("nvidia-smi-q", fixture_text(SLOWED))
    assert isinstance(smi, NvidiaSmiQ)
    [finding] = smi_health_rules(smi, "n1")  # 7 idle GPUs and SW Power Cap say nothing
    assert finding.code == "gpu-clocks-slowed" and finding.severity == "warning"
    assert (
        finding.message
        == "GPU 00000000:75:00.0: clocks slowed by HW Power Brake Slowdown, SW Thermal Slowdown"
    )
    assert finding.advice.startswith("Check the node's power supplies")
    healthy = parse("nvidia-smi-q", fixture_text(HEALTHY_SMI))
    assert isinstance(healthy, NvidiaSmiQ) and smi_health_rules(healthy, "n1") == []


def test_a_link_that_went_down_between_two_reads_flaps_and_history_is_only_info() -> None:
    first, second = (parse("sysfs-counters", fixture_text(f)) for f in (COUNTERS, COUNTERS_FLAPPED))
    assert isinstance(first, PortCounters) and isinstance(second, PortCounters)
    findings = port_error_rules(first, second, 5, "n1")
    errors = [f for f in findings if f.severity != "info"]
    assert [(f.code, f.message) for f in errors] == [
        ("ib-port-flapping", "mlx5_0:1: link downed +1 within 5 s")
    ]
    assert errors[0].advice.startswith("Reseat or replace the cable")
    history = {f.message.split(":")[0] for f in findings if f.code == "ib-port-error-history"}
    assert "mlx5_1" in history  # link_downed 255 since the last clear: history, not a fault now
    assert {f.severity for f in port_error_rules(first, first, 5, "n1")} == {"info"}


def test_perfquery_counters_of_a_clean_port_give_nothing() -> None:
    counters = parse("perfquery", fixture_text("perfquery/infiniband-exporter-2port-extended.txt"))
    assert isinstance(counters, PortCounters)
    assert port_error_rules(counters, counters, 5, None) == []


@pytest.mark.parametrize(
    ("change", "code", "action"),
    [
        ({"kernel-log": XID79}, "xid-79", "Drain the node and reboot it"),
        ({"nvidia-smi-q": REMAP}, "gpu-row-remap-pending", "Drain the node, then reset the GPU"),
        ({"lspci-vvv": LSPCI_X8}, "pcie-link-downgraded", "Reseat the card"),
        ({"ib-port-errors-2": COUNTERS_FLAPPED}, "ib-port-flapping", "Reseat or replace the cable"),
    ],
    ids=["xid", "remap-pending", "downgraded-link", "flapping-port"],
)
def test_fixture_bundle_names_the_faulty_node_the_finding_and_the_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, str], code: str, action: str
) -> None:
    write_bundle(
        tmp_path,
        {
            "hgx-01": health_bundle("hgx-01", HEALTHY),
            "hgx-02": health_bundle("hgx-02", {**HEALTHY, **change}),
        },
    )
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path), "--json"]) == 1
    out = strict_loads(capsys.readouterr().out)
    assert out["schema"] == "clusterctl.check-health/2"
    assert out["nodes"]["hgx-01"]["verdict"] == "ok"
    assert not [f for f in out["nodes"]["hgx-01"]["findings"] if f["severity"] != "info"]
    assert out["nodes"]["hgx-02"]["verdict"] == "fail"
    [finding] = [f for f in out["nodes"]["hgx-02"]["findings"] if f["code"] == code][:1]
    assert finding["severity"] == "error" and finding["node"] == "hgx-02"
    assert finding["advice"].startswith(action)

    # People read the verdicts first: the summary, then the node that needs a look, at 80 columns.
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("2 nodes: 1 FAIL, 1 OK; ")
    assert lines[1].split()[:3] == ["hgx-02", "FAIL", f"{code}:"]
    assert lines[2].split()[:2] == ["hgx-01", "OK"]


def test_a_check_that_could_not_look_makes_the_node_unknown_not_healthy(tmp_path: Path) -> None:
    inventory = load_inventory(INVENTORY)
    denied = "dmesg: read kernel buffer failed: Operation not permitted"
    bundles = {
        "hgx-01": health_bundle("hgx-01", HEALTHY, failed={"kernel-log": denied}),
        "hgx-02": health_bundle("hgx-02", HEALTHY),
    }
    report = judge_health(bundles, inventory, tmp_path, 5)
    health = report.nodes["hgx-01"]
    assert (health.verdict, health.unknown) == ("unknown", ["kernel-log"])
    assert health.summary() == "could not check: kernel-log"
    assert any(f.code == "collector-failed" and denied in f.message for f in health.findings)
    assert report.nodes["hgx-02"].verdict == "ok"


def test_a_node_missing_from_the_bundle_is_unknown(tmp_path: Path) -> None:
    report = judge_health(
        {"hgx-02": health_bundle("hgx-02", HEALTHY)}, load_inventory(INVENTORY), tmp_path, 5
    )
    assert report.nodes["hgx-01"].verdict == "unknown"
    assert report.to_json()["nodes"]["hgx-01"]["findings"][0]["code"] == "node-not-in-bundle"


def _kernel_log_script(tmp_path: Path, fake_dmesg: str) -> subprocess.CompletedProcess[str]:
    """The collector's own shell text, run by sh with ``fake_dmesg`` as dmesg (this machine has no GPU)."""
    (tmp_path / "dmesg").write_text(fake_dmesg)
    (tmp_path / "dmesg").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", "-c", _KERNEL_LOG], capture_output=True, text=True, env=env, timeout=30, check=False
    )


def test_kernel_log_collector_keeps_only_xid_lines_and_fails_when_dmesg_fails(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(fixture_text(XID119))
    done = _kernel_log_script(tmp_path, f"#!/bin/sh\ncat {log}\n")
    assert done.returncode == 0
    parsed = parse("kernel-log", done.stdout)
    assert isinstance(parsed, KernelLog)
    assert len(done.stdout.splitlines()) == len(parsed.events) == 5  # the 38 dump lines stay on the node
    denied = _kernel_log_script(
        tmp_path, "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted'\nexit 1\n"
    )
    assert denied.returncode == 1 and "Operation not permitted" in denied.stderr and denied.stdout == ""


def test_drain_reason_is_one_bounded_printable_line_and_argv_quotes_nothing_itself() -> None:
    reason = drain_reason("xid-79: Xid 79 on GPU\n0000:91:00 " + "x" * 500)
    assert reason.startswith(REASON_PREFIX) and len(reason) == MAX_REASON and "\n" not in reason
    argv = update_argv(SlurmAction("node2", "drain", reason))
    assert (
        argv[:4] == ["scontrol", "update", "nodename=node2", "state=drain"] and argv[4] == f"reason={reason}"
    )
    assert update_argv(SlurmAction("node2", "resume", "")) == [
        "scontrol",
        "update",
        "nodename=node2",
        "state=resume",
    ]
