"""`check health` never says OK for what it could not see (issue 37): a missing, unreadable or partial
input, or an active check that measured nothing, leaves the node ``unknown`` with the reason; a node
that lost a GPU fails; a bundle's node is the directory it sits in. No host is contacted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from clusterctl.check.health_collective import COLLECTIVES_FILE
from clusterctl.cli import main
from clusterctl.diagnostics.active import NodeCollective, collective_findings
from clusterctl.diagnostics.bundle import META, NodeBundle, write_bundle
from clusterctl.diagnostics.collectors import COLLECTORS
from clusterctl.diagnostics.health import _KERNEL_LOG, HealthReport, judge_health
from clusterctl.diagnostics.junit import Case, junit_xml
from clusterctl.diagnostics.parsers.kernel_log import parse_kernel_log
from clusterctl.diagnostics.parsers.nvbandwidth import parse_nvbandwidth
from clusterctl.inventory import load_inventory
from tests.fixtures import fixture_text
from tests.helpers.health import (
    COUNTERS,
    COUNTERS_CLEARED,
    DCGM_PASS,
    H2D_8GPU,
    HEALTHY,
    INVENTORY,
    active_bundle,
    health_bundle,
)
from tests.helpers.strictjson import strict_loads

XID79 = "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def _judge(bundles: dict[str, NodeBundle], tmp_path: Path) -> HealthReport:
    return judge_health(bundles, load_inventory(INVENTORY), tmp_path, 5)


def _healthy_pair(**change: str) -> dict[str, NodeBundle]:
    """hgx-01 healthy; hgx-02 healthy but for ``change`` (collector key -> output text, not a fixture)."""
    second = health_bundle("hgx-02", HEALTHY)
    second.outputs.update(change)
    return {"hgx-01": health_bundle("hgx-01", HEALTHY), "hgx-02": second}


def test_the_healthy_pair_is_ok_and_the_saturated_capture_is_unknown(tmp_path: Path) -> None:
    report = _judge(_healthy_pair(), tmp_path)
    assert {n: h.verdict for n, h in report.nodes.items()} == {"hgx-01": "ok", "hgx-02": "ok"}
    # The real capture: link_downed at 255 (8 bits) on mlx5_1 cannot show a flap.
    saturated = fixture_text(COUNTERS)
    health = _judge(_healthy_pair(**{"ib-port-errors": saturated, "ib-port-errors-2": saturated}), tmp_path)
    [finding] = [f for f in health.nodes["hgx-02"].findings if f.code == "ib-port-counters-unknown"]
    assert health.nodes["hgx-02"].verdict == "unknown" and "mlx5_1:1 " in finding.message
    assert "link_downed" in finding.message and "at its maximum (saturated)" in finding.message


def test_a_topology_bundle_given_to_check_health_is_unknown_not_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology_keys = {c.key for c in COLLECTORS}
    bundles = _healthy_pair()
    for bundle in bundles.values():
        bundle.meta.sections = {k: s for k, s in bundle.meta.sections.items() if k in topology_keys}
        bundle.outputs = {k: t for k, t in bundle.outputs.items() if k in topology_keys}
    write_bundle(tmp_path, bundles)
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path), "--json"]) == 1
    out = strict_loads(capsys.readouterr().out)
    for node in out["nodes"].values():
        assert node["verdict"] == "unknown"
        assert {"kernel-log", "ib-port-errors", "ib-port-errors-2"} <= set(node["unknown"])
        missing = [f for f in node["findings"] if f["code"] == "health-input-missing"]
        assert any("no kernel-log section" in f["message"] for f in missing)


def test_a_section_marked_ok_whose_file_is_gone_is_unknown(tmp_path: Path) -> None:
    write_bundle(tmp_path, _healthy_pair())
    (tmp_path / "hgx-02" / "kernel-log.txt").unlink()
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 1
    from clusterctl.diagnostics.bundle import read_bundle

    report = _judge(read_bundle(tmp_path), tmp_path)
    health = report.nodes["hgx-02"]
    assert (health.verdict, health.unknown) == ("unknown", ["kernel-log"])
    [missing] = [f for f in health.findings if f.code == "collector-failed"]
    assert (
        "no-answer: meta.json says it ran, but its output kernel-log.txt is not in the bundle"
        in missing.message
    )
    assert report.nodes["hgx-01"].verdict == "ok"


@pytest.mark.parametrize(
    "line",
    [
        # CONFIG_PRINTK_CALLER: the task (T) or CPU (C) after the stamp
        "[ 6781741.548779][  T1234] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.",
        "[ 6781741.548779][    C7] NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        # dmesg -x (--decode): facility and level, padded
        "kern  :err   : [6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        "kern  :warn  : [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen "
        "off the bus.",
        # dmesg -r and /dev/kmsg: the raw level
        "<3>[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        # journalctl -k (short and short-iso)
        "Feb 23 16:24:18 hgx-02 kernel: NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off the bus.",
        "2025-02-23T16:24:18+0000 hgx-02 kernel: NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen "
        "off the bus.",
        "Feb 23 16:24:18.123456 hgx-02 kernel: NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off "
        "the bus.",  # -o short-precise
        "[ 6781741.548779] hgx-02 kernel: NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, GPU has fallen off the "
        "bus.",  # -o short-monotonic
    ],
)
def test_the_kernel_log_prefixes_of_real_tools_are_read(line: str) -> None:
    log = parse_kernel_log(line + "\n")
    assert [(e.code, e.device) for e in log.events] == [(79, "0000:91:00")], log.unparsed_lines
    assert log.events[0].detail == ("GPU has fallen off the bus.") and not log.unparsed_lines


@pytest.mark.parametrize(
    "line",
    [
        "[6781741.548779] NVRM: Xid (PCI:0000:91:00): 7\x009, pid=1, name=x, GPU has fallen off the bus.",
        "\x00\x00[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.",
        "{6781741.548779} NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.",
        "[6781741.548779] NVRM: Xid (PCI:0000:91:00): seventy-nine, GPU has fallen off the bus.",
    ],
)
def test_an_xid_line_that_cannot_be_read_leaves_the_node_unknown(line: str, tmp_path: Path) -> None:
    log = parse_kernel_log(f"{XID79}\n{line}\n")
    assert len(log.events) == 1 and log.unparsed_lines == [line]
    health = _judge(_healthy_pair(**{"kernel-log": f"{line}\n"}), tmp_path).nodes["hgx-02"]
    assert health.verdict == "unknown" and "kernel-log" in health.unknown
    [finding] = [f for f in health.findings if f.code == "kernel-log-unreadable"]
    assert "1 lines name an Xid" in finding.message


def _counters_without(line_part: str) -> str:
    return "".join(
        line for line in fixture_text(COUNTERS_CLEARED).splitlines(keepends=True) if line_part not in line
    )


def _counters_with(name: str, value: int) -> str:
    return "".join(
        f"{line.split(':')[0]}:{value}\n" if line.split(":")[0].endswith(f"/counters/{name}") else line
        for line in fixture_text(COUNTERS_CLEARED).splitlines(keepends=True)
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"ib-port-errors-2": _counters_without("/mlx5_0/")}, "mlx5_0:1 is gone from the second read"),
        ({"ib-port-errors-2": _counters_without("/link_downed")}, "link_downed gone from the second read"),
        ({"ib-port-errors-2": ""}, "is gone from the second read"),
        ({"ib-port-errors": _counters_with("port_xmit_data", 4294967295),
          "ib-port-errors-2": _counters_with("port_xmit_data", 4294967295)}, "at its maximum (saturated)"),
        ({"ib-port-errors": _counters_with("link_downed", 255),
          "ib-port-errors-2": _counters_with("link_downed", 255)}, "link_downed at its maximum"),
        ({"ib-port-errors": _counters_with("symbol_error", 7)}, "went down between the reads"),
        ({"ib-port-errors-2": fixture_text(COUNTERS_CLEARED) + "/sys/class/infiniband/mlx5_0/ports/1/counters/x: 9e9\n"},
         "1 lines of the counter reads could not be read"),
    ],
)  # fmt: skip
def test_port_counters_that_vanish_saturate_or_reset_leave_the_node_unknown(
    change: dict[str, str], said: str, tmp_path: Path
) -> None:
    health = _judge(_healthy_pair(**change), tmp_path).nodes["hgx-02"]
    assert health.verdict == "unknown" and health.unknown == ["ib-port-errors"]
    [finding] = [f for f in health.findings if f.code == "ib-port-counters-unknown"]
    assert said in finding.message


def test_a_node_that_lost_a_gpu_fails_against_its_own_inventory_count(tmp_path: Path) -> None:
    eight = fixture_text("nvidia_smi_q/gpud-8xh100-535.161.08-fabric-completed.txt")
    head, *gpus = eight.split("\nGPU 0000")
    seven = "\nGPU 0000".join([head.replace("Attached GPUs                             : 8",
                                            "Attached GPUs                             : 7"), *gpus[:7]])  # fmt: skip
    inventory = load_inventory(INVENTORY)
    assert inventory.nodes[1].gpus.count == 8
    bundles = {name: health_bundle(name, HEALTHY) for name in ("hgx-01", "hgx-02")}
    bundles["hgx-01"].outputs["nvidia-smi-q"] = eight
    bundles["hgx-02"].outputs["nvidia-smi-q"] = seven
    report = judge_health(bundles, inventory, tmp_path, 5)
    [finding] = [f for f in report.nodes["hgx-02"].findings if f.code == "gpu-count-mismatch"]
    assert report.nodes["hgx-02"].verdict == "fail" and finding.severity == "error"
    assert "lists 7 GPUs" in finding.message and "gives this node 8" in finding.message
    assert not [f for f in report.nodes["hgx-01"].findings if f.code == "gpu-count-mismatch"]

    # An output cut short (8 attached, 7 listed) is no evidence of a lost GPU: unknown, not a drain.
    bundles["hgx-02"].outputs["nvidia-smi-q"] = "\nGPU 0000".join([head, *gpus[:7]])
    health = judge_health(bundles, inventory, tmp_path, 5).nodes["hgx-02"]
    assert health.verdict == "unknown" and health.unknown == ["nvidia-smi-q"]
    assert [f.code for f in health.findings if f.code.startswith("gpu-count")] == ["gpu-count-unknown"]

    # Per node: a node the inventory gives 7 GPUs is right with 7.
    text = INVENTORY.read_text().replace(
        "  - name: hgx-02\n", "  - name: hgx-02\n    gpus:\n      count: 7\n", 1
    )
    (tmp_path / "inv.yml").write_text(text)
    per_node = load_inventory(tmp_path / "inv.yml")
    assert per_node.nodes[1].gpus.count == 7 and per_node.nodes[0].gpus.count == 8
    report = judge_health(bundles, per_node, tmp_path, 5)
    assert not [f for f in report.findings if f.code == "gpu-count-mismatch"]


def _standard(h2d: str, dcgm: str) -> dict[str, NodeBundle]:
    files = {**HEALTHY, "h2d-bandwidth": H2D_8GPU, "dcgmi-diag": DCGM_PASS}
    bundles = {name: active_bundle(name, files) for name in ("hgx-01", "hgx-02")}
    if h2d:
        bundles["hgx-02"].outputs["h2d-bandwidth"] = h2d
    if dcgm:
        bundles["hgx-02"].outputs["dcgmi-diag"] = dcgm
    return bundles


def test_active_checks_that_measured_nothing_are_unknown(tmp_path: Path) -> None:
    baseline = _judge(_standard("", ""), tmp_path).nodes["hgx-02"]
    assert baseline.verdict == "ok", [f.message for f in baseline.findings]
    header_only = (
        "nvbandwidth Version: v0.2\nRunning host_to_device_memcpy_ce.\n"
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n          0         1\n\nSUM host_to_device_memcpy_ce 0.00\n"
    )
    health = _judge(_standard(header_only, ""), tmp_path).nodes["hgx-02"]
    assert health.verdict == "unknown" and health.active["h2d-bandwidth"].status == "unknown"
    assert "printed no host-to-GPU figure" in health.active["h2d-bandwidth"].detail

    skipped = "\n".join(line.replace("Pass", "Skip") for line in fixture_text(DCGM_PASS).splitlines())
    health = _judge(_standard("", skipped), tmp_path).nodes["hgx-02"]
    assert health.verdict == "unknown" and health.active["dcgmi-diag"].status == "unknown"
    assert "skipped all" in health.active["dcgmi-diag"].detail


def test_a_5000_digit_number_in_nvbandwidth_is_no_crash_and_no_figure(tmp_path: Path) -> None:
    huge = "9" * 5000
    for text in (
        f"Running host_to_device_memcpy_ce.\n memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0 {huge}\n"
        "0 25.5 24.1\n",
        f"Running host_to_device_memcpy_ce.\n          0         1\n0     {huge}     24.26\nSUM host_to_device_memcpy_ce {huge}\n",
    ):
        parsed = parse_nvbandwidth(text)
        assert all(v < 1e6 for v in parsed.gpus.values()) and parsed.total is None
        health = _judge(_standard(text, ""), tmp_path).nodes["hgx-02"]
        assert health.verdict == "unknown" and "h2d-bandwidth" in health.unknown


def test_a_collective_at_nan_is_unknown_not_ok(tmp_path: Path) -> None:
    results = [
        NodeCollective("hgx-01", (150.0,), (), ("r1",)),
        NodeCollective("hgx-02", (float("nan"),), (), ("r2",)),
    ]
    findings = collective_findings(results, None, "")
    assert [f.code for f in findings] == ["collective", "collective-unknown"]
    report = _judge(_healthy_pair(), tmp_path)
    report.add_collectives(results, None, "")
    assert (
        report.nodes["hgx-02"].verdict == "unknown"
        and report.nodes["hgx-02"].active["collective"].status == "unknown"
    )
    assert report.nodes["hgx-01"].verdict == "ok"


def test_the_node_is_its_directory_and_a_copy_or_rename_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundles = _healthy_pair()
    bundles["hgx-01"].outputs["kernel-log"] = XID79 + "\n"
    write_bundle(tmp_path, bundles)
    # hgx-02's directory holds a copy of hgx-01's faulty bundle: it must not stand in for hgx-02.
    meta = json.loads((tmp_path / "hgx-01" / META).read_text())
    (tmp_path / "hgx-02" / META).write_text(json.dumps(meta))
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "hgx-02/meta.json says node 'hgx-01'" in err and "sits in the directory of node 'hgx-02'" in err
    assert "hgx-01 is there too" in err.replace("\n", " ").replace(str(tmp_path) + "/", "")
    assert main(["check", "topology", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 2  # one reader
    assert "hgx-02/meta.json says node 'hgx-01'" in capsys.readouterr().err

    # A duplicate directory of one node (a copy under another name) is refused the same way.
    write_bundle(tmp_path, bundles)
    (tmp_path / "hgx-01-copy").mkdir()
    (tmp_path / "hgx-01-copy" / META).write_text((tmp_path / "hgx-01" / META).read_text())
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 2
    assert "hgx-01-copy/meta.json says node 'hgx-01'" in capsys.readouterr().err


def test_drain_and_resume_in_one_command_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-inventory.yml"  # refused before the inventory is even read
    argv = ["check", "health", "-i", str(missing), "--slurm-drain", "--slurm-resume", "hgx-02"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--slurm-drain and --slurm-resume hgx-02 together" in err and "Fix:" in err
    assert not (Path("runs") / "health").exists() or not any((Path("runs") / "health").iterdir())


def test_deeply_nested_json_in_a_bundle_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    write_bundle(tmp_path, _healthy_pair())
    (tmp_path / "hgx-02" / META).write_text(nested)
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 2
    assert "nested too deep" in capsys.readouterr().err
    write_bundle(tmp_path, _healthy_pair())
    (tmp_path / COLLECTIVES_FILE).write_text(nested)
    assert main(["check", "health", "-i", str(INVENTORY), "--from", str(tmp_path)]) == 2
    assert "collectives file" in capsys.readouterr().err


def test_junit_is_well_formed_for_any_node_text_and_paths_print_no_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundles = _healthy_pair()
    odd = "\ufffe\uffff\x1b[2J\x00\U0001f600 Xid (PCI:0000:91:00)"
    bundles["hgx-02"].outputs["kernel-log"] = XID79.replace("fallen off the bus.", odd) + "\n" + odd + "\n"
    directory = tmp_path / "bundle\x1b]0;owned\x07"
    write_bundle(directory, bundles)
    junit = tmp_path / "junit.xml"
    assert (
        main(["check", "health", "-i", str(INVENTORY), "--from", str(directory), "--junit", str(junit)]) == 1
    )
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\\x1b]0;owned" in captured.err
    root = ElementTree.fromstring(junit.read_bytes())
    text = ElementTree.tostring(root, encoding="unicode")
    assert "\\ufffe" in text and "\\uffff" in text and "\U0001f600" in text
    # A lone surrogate (no bundle holds one: outputs are decoded with replacement) is shown too.
    xml = junit_xml("s", [Case("n\ud800", "c", "f\udfff", "\ufffe")])
    assert ElementTree.fromstring(xml.encode()) is not None and "\\ud800" in xml


@pytest.mark.parametrize("window", ["nan", "inf", "-1", "1e309"])
def test_window_must_be_a_finite_number_of_seconds(window: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "health", "-i", str(INVENTORY), "--from", "x", "--window", window]) == 2
    assert "--window" in capsys.readouterr().err


def test_an_xid_line_with_a_byte_that_is_no_utf8_still_reaches_the_parser(tmp_path: Path) -> None:
    """GNU grep in a UTF-8 locale calls such a line binary and prints "binary file matches" instead of it."""
    fake = tmp_path / "dmesg"
    fake.write_bytes(
        b"#!/bin/sh\nprintf 'NVRM: Xid (PCI:0000:91:00): 79, name=\\377, GPU has fallen off the bus.\\n'\n"
    )
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["sh", "-c", _KERNEL_LOG], capture_output=True, env=env, timeout=30, check=False)
    assert done.returncode == 0 and b"binary file" not in done.stderr, done.stderr
    log = parse_kernel_log(done.stdout.decode("utf-8", errors="replace"))
    assert [(e.code, e.device) for e in log.events] == [(79, "0000:91:00")]
