"""check topology's pure parts: the framed collection script, the bundle on disk, the judgement.

The script is run for real with the local `sh`; bundles are assembled from the real fixtures."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.diagnostics import KINDS, PARSERS, detect_kind
from clusterctl.diagnostics.bundle import read_bundle, write_bundle
from clusterctl.diagnostics.collect import prune_status_bundles
from clusterctl.diagnostics.collectors import (
    COLLECTORS,
    Collector,
    collection_script,
    node_bundle,
    section_status,
    split_sections,
)
from clusterctl.diagnostics.inspect import inspect_file
from clusterctl.diagnostics.parsers.ip_addr import parse_ip_addr
from clusterctl.diagnostics.parsers.peermem import parse_peermem
from clusterctl.diagnostics.parsers.proc_modules import parse_proc_modules
from clusterctl.diagnostics.rules_cluster import judge_bundle
from clusterctl.errors import InputError
from clusterctl.hosts.command import CommandResult
from clusterctl.inventory import Inventory, load_inventory
from tests.fixtures import fixture_text
from tests.helpers.strictjson import strict_loads
from tests.helpers.topology import (
    FIXTURE_NODE,
    IP_SAMPLE,
    PAPER_C4140,
    REPO,
    SECOND_NODE,
    saved_topology,
    topology_bundle,
)

# ------------------------------------------------------------------------------------ the script

LOCAL = (
    Collector("absent", ("clusterctl-no-such-command-7f3a",), "peermem", "any"),
    Collector("printed", ("printf", "a\nb"), "peermem", "any"),
    Collector("false", ("false",), "peermem", "any"),
    Collector("tolerated", ("sh", "-c", "echo /sys/x; exit 2"), "peermem", "any", frozenset({0, 2})),
)


def _run_locally(collectors: tuple[Collector, ...]) -> str:
    return subprocess.run(
        ["sh", "-c", collection_script(collectors)], capture_output=True, text=True, timeout=60
    ).stdout


def test_script_frames_missing_failed_and_output_without_final_newline() -> None:
    sections = split_sections(_run_locally(LOCAL))
    assert set(sections) == {"absent", "printed", "false", "tolerated"}
    assert sections["absent"].exit_status == 127
    assert "not installed" in sections["absent"].stderr_tail
    assert sections["printed"].stdout == "a\nb"
    statuses = {c.key: section_status(c, sections[c.key]) for c in LOCAL}
    assert statuses == {"absent": "missing", "printed": "ok", "false": "failed", "tolerated": "ok"}


def test_a_section_cut_off_before_its_end_marker_is_no_answer() -> None:
    output = _run_locally(LOCAL[1:2])
    cut = output[: output.index("@@clusterctl-collect@@ exit")]
    assert split_sections(cut) == {}
    assert section_status(LOCAL[1], split_sections(cut).get("printed")) == "no-answer"


def test_real_script_reports_every_collector_on_this_machine() -> None:
    sections = split_sections(_run_locally(COLLECTORS))
    assert set(sections) == {c.key for c in COLLECTORS}
    assert parse_ip_addr(sections["ip-addr"].stdout).interface("lo") is not None


# ------------------------------------------------------------------------------------ the bundle


def _result(node: str, collectors: tuple[Collector, ...] = LOCAL) -> CommandResult:
    return CommandResult(node, "sh -c ...", 0, _run_locally(collectors), "", 1.5)


def test_bundle_round_trip_keeps_outputs_and_meta_and_skips_missing(tmp_path: Path) -> None:
    bundles = {"n1": node_bundle(_result("n1"), "2026-01-01T00:00:00+00:00", LOCAL)}
    write_bundle(tmp_path, bundles)
    assert not (tmp_path / "n1" / "absent.txt").exists()
    assert (tmp_path / "n1" / "printed.txt").read_text() == "a\nb"
    assert read_bundle(tmp_path) == bundles
    meta = json.loads((tmp_path / "n1" / "meta.json").read_text())
    assert meta["sections"]["false"] == {
        "argv": ["false"],
        "status": "failed",
        "exit_status": 1,
        "stderr_tail": "",
    }


def test_unreachable_node_bundle_has_every_section_no_answer() -> None:
    result = CommandResult("n2", "sh", None, error="n2: unreachable (refused)", unreachable=True)
    bundle = node_bundle(result, "2026-01-01T00:00:00+00:00")
    assert bundle.meta.unreachable and bundle.outputs == {}
    assert {s.status for s in bundle.meta.sections.values()} == {"no-answer"}


def test_read_bundle_of_an_empty_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no bundle"):
        read_bundle(tmp_path)


def test_inspect_detects_a_bundle_file(tmp_path: Path) -> None:
    text = fixture_text("ibstat/felixfu-connectx3-mt4099-1port-rate-40-fdr10.txt")
    write_bundle(tmp_path, {"n1": topology_bundle("n1", {"ibstat": text})})
    assert inspect_file(tmp_path / "n1" / "ibstat.txt").kind == "ibstat"


# ------------------------------------------------------------------------------------ parsers


def test_ip_addr_sample_captured_here() -> None:
    parsed = parse_ip_addr(fixture_text(IP_SAMPLE))
    eth0 = parsed.interface("eth0")
    assert eth0 is not None and eth0.state == "UP" and "192.0.2.2/24" in eth0.addresses
    ifb0 = parsed.interface("ifb0")
    assert ifb0 is not None and ifb0.addresses == []
    assert parse_ip_addr("Usage: ip address ...").error


def test_proc_modules_missing_file_and_proc5_lines() -> None:
    missing = parse_proc_modules(fixture_text("proc_modules/vm-no-proc-modules-error.txt"))
    assert missing.modules == [] and missing.error is not None and "No such file" in missing.error
    # Line shape from proc(5): name size refcount deps state address.
    lines = "nvidia_peermem 16384 0 - Live 0x0000000000000000\nmlx5_ib 397312 0 - Live 0xffffffffc0a00000\n"
    assert parse_proc_modules(lines).modules == ["nvidia_peermem", "mlx5_ib"]


def test_every_collector_output_has_a_registered_kind() -> None:
    assert {c.kind for c in COLLECTORS} <= set(KINDS) & set(PARSERS)


def test_host_fact_kinds_detected_and_parsed_on_real_captures() -> None:
    pretty = fixture_text("ip_addr/vm-eth0-pretty-json.txt")
    assert detect_kind(pretty) == detect_kind(fixture_text(IP_SAMPLE)) == "ip-addr"
    eth0 = parse_ip_addr(pretty).interface("eth0")
    assert eth0 is not None
    assert eth0.addresses == [
        "192.0.2.2/24",
        "fd00::2/64",
        "fe80::fc:ff:fe00:1/64",
    ]
    taint = fixture_text("proc_modules/popos-proc-modules-snd-deps-nvidia-drm-taint-partial.txt")
    deps = fixture_text("proc_modules/jamescun-procfs-wireguard-deps.txt")
    assert detect_kind(taint) == detect_kind(deps) == "proc-modules"  # not CSV despite 4-5 commas a line
    assert parse_proc_modules(taint).modules == [
        "snd_hda_intel",
        "snd_hda_codec",
        "snd_hda_core",
        "nvidia_drm",
    ]
    assert len(parse_proc_modules(deps).modules) == 6 and parse_proc_modules(deps).error is None
    probe = parse_peermem(fixture_text("peermem/vm-no-peermem-ls-d-stderr-gdr-cc-paths.txt"))
    assert (
        probe.present == []
        and probe.absent[0] == "/sys/kernel/mm/memory_peers/nv_mem/version"
        and not probe.unparsed_lines
    )


# ------------------------------------------------------------------------------------ judgement


def _paper(tmp_path: Path, replace: dict[str, str] | None = None) -> Inventory:
    """The paper-c4140 inventory with ``replace``'s texts swapped in."""
    text = PAPER_C4140.read_text()
    for old, new in (replace or {}).items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return load_inventory(path)


def _codes(findings: list) -> set[tuple[str, str, str | None]]:
    return {(f.severity, f.code, f.node) for f in findings}


def test_judge_paper_cluster_from_fixtures(tmp_path: Path) -> None:
    inventory = _paper(tmp_path)
    bundles = {
        "c4140-1": topology_bundle("c4140-1", FIXTURE_NODE),
        "c4140-2": topology_bundle(
            "c4140-2", {"ofed-info": fixture_text("ofed_info/ucx-issue2888-full-ofed_info-head1-4.2.txt")}
        ),
    }
    report = judge_bundle(bundles, inventory)
    node1 = _codes(report.nodes["c4140-1"].findings)
    assert ("info", "gdr-usable", "c4140-1") in node1  # NODE path, gdr_level 3 (PHB)
    assert ("info", "ib-port-down", "c4140-1") in node1  # mlx5_1 is down but not the inventory's HCA
    assert ("error", "ipoib-address-mismatch", "c4140-1") in node1  # the sample has no ib0
    assert ("error", "peermem-missing", "c4140-1") in node1  # gdr_level set, no module
    assert ("error", "tool-missing", "c4140-1") in node1  # ibv_devinfo on an IB node
    assert ("error", "tool-missing", "c4140-2") in _codes(report.nodes["c4140-2"].findings)
    cluster = _codes(report.cluster)
    assert ("error", "ofed-version-mismatch", None) in cluster
    assert ("warning", "ofed-version-unexpected", "c4140-1") in cluster  # image MOFED is 4.7-3.2.9.0


def test_gdr_not_used_when_the_configured_level_is_below_the_path(tmp_path: Path) -> None:
    report = judge_bundle(
        {"c4140-1": topology_bundle("c4140-1", FIXTURE_NODE)},
        _paper(tmp_path, {"gdr_level: 3": "gdr_level: 1"}),
    )
    assert ("warning", "gdr-not-used-topology", "c4140-1") in _codes(report.nodes["c4140-1"].findings)
    assert _codes(report.nodes["c4140-2"].findings) == {("warning", "node-not-in-bundle", "c4140-2")}


def test_fabric_address_present_means_no_mismatch(tmp_path: Path) -> None:
    inventory = _paper(
        tmp_path,
        {
            "interface: ib0": "interface: eth0",
            "192.168.11.1/24": "192.0.2.2/24",
            "192.168.11.2/24": "192.0.2.3/24",
        },
    )
    report = judge_bundle({"c4140-1": topology_bundle("c4140-1", FIXTURE_NODE)}, inventory)
    codes = {f.code for f in report.nodes["c4140-1"].findings}
    assert "ipoib-address-mismatch" not in codes and "fabric-interface-down" not in codes


def test_peermem_loaded_but_not_registered_is_its_own_finding(tmp_path: Path) -> None:
    outputs = {**FIXTURE_NODE, "peermem": "/sys/module/nvidia_peermem/version\n"}
    report = judge_bundle({"c4140-1": topology_bundle("c4140-1", outputs)}, _paper(tmp_path))
    codes = {f.code for f in report.nodes["c4140-1"].findings}
    assert "peermem-missing" not in codes and "peermem-not-registered" in codes
    registered = "/sys/kernel/mm/memory_peers/nv_mem_nc/version\n/sys/module/nvidia_peermem/version\n"
    report = judge_bundle(
        {"c4140-1": topology_bundle("c4140-1", {**outputs, "peermem": registered})}, _paper(tmp_path)
    )
    assert not {"peermem-missing", "peermem-not-registered"} & {
        f.code for f in report.nodes["c4140-1"].findings
    }


# ------------------------------------------------------------------------------------ the command


def test_check_topology_exit_1_and_bundle_when_a_node_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "inv.yml"
    inventory.write_text(
        "cluster:\n  name: topo-unreachable\n  defaults:\n    ssh: {port: 1, connect_timeout_s: 2}\n"
        "nodes:\n  - {name: n1, address: 127.0.0.1, role: primary}\n"
    )
    code = main(
        [
            "check",
            "topology",
            "-i",
            str(inventory),
            "--json",
            "--bundle",
            str(tmp_path / "b"),
            "--timeout",
            "5",
        ]
    )
    out = strict_loads(capsys.readouterr().out)
    assert code == 1
    assert out["bundle"] == str(tmp_path / "b")
    assert [f["code"] for f in out["nodes"]["n1"]["findings"]] == ["node-unreachable"]
    advice = out["nodes"]["n1"]["findings"][0]["advice"]
    assert "--limit n1" in advice and "clusterctl inventory check" not in advice  # a command that exists
    assert json.loads((tmp_path / "b" / "n1" / "meta.json").read_text())["unreachable"] is True


# ------------------------------------------------------------------------------------ inspect a bundle


def test_inspect_reads_every_file_of_a_bundle_collected_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_bundle(tmp_path, {"n1": node_bundle(_result("n1", COLLECTORS), "2026-01-01T00:00:00+00:00")})
    files = sorted((tmp_path / "n1").iterdir())
    assert {"ip-addr.txt", "peermem.txt", "meta.json"} <= {f.name for f in files}
    assert main(["inspect", "--json", *map(str, files)]) == 0
    kinds = {Path(item["file"]).name: item for item in strict_loads(capsys.readouterr().out)}
    expected = {f"{c.key}.txt": c.kind for c in COLLECTORS if f"{c.key}.txt" in kinds}
    assert {name: kinds[name]["kind"] for name in expected} == expected  # peermem.txt may well be empty
    assert kinds["ip-addr.txt"]["parsed"]["interfaces"][0]["name"] == "lo"
    assert kinds["meta.json"]["kind"] is None
    assert [f["code"] for f in kinds["meta.json"]["findings"]] == ["bundle-meta"]
    assert str(tmp_path) in kinds["meta.json"]["findings"][0]["advice"]


def test_inspect_bundle_files_from_fixtures_take_their_collectors_kinds(tmp_path: Path) -> None:
    modules = fixture_text("proc_modules/jamescun-procfs-wireguard-deps.txt")
    bundle = saved_topology(tmp_path, {"c4140-2": {**SECOND_NODE, "peermem": "", "modules": modules}})
    kinds = {c.key: c.kind for c in COLLECTORS}
    for path in sorted((bundle / "c4140-2").glob("*.txt")):
        assert inspect_file(path).kind == kinds[path.stem], path.name
    loose = tmp_path / "peermem.txt"  # the same empty output outside a bundle: nothing to detect
    loose.write_text("")
    assert inspect_file(loose).kind is None


def test_inspect_forced_ip_addr_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "addresses.json"
    raw.write_text(fixture_text(IP_SAMPLE))
    assert main(["inspect", "--json", "--kind", "ip-addr", str(raw)]) == 0
    [item] = strict_loads(capsys.readouterr().out)
    assert item["kind"] == "ip-addr" and item["findings"] == [] and item["parsed"]["error"] is None
    assert "192.0.2.2/24" in item["parsed"]["interfaces"][3]["addresses"]


# ------------------------------------------------------------------------------------ check topology --from


def _no_collection(*args: object, **kwargs: object) -> None:
    raise AssertionError("--from must not contact any host")


def _check_from(directory: Path, *extra: str) -> int:
    return main(["check", "topology", "--from", str(directory), "-i", str(PAPER_C4140), *extra])


def test_check_topology_from_a_saved_bundle_judges_it_without_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clusterctl.diagnostics.collect.collect", _no_collection)
    bundle = saved_topology(tmp_path / "bundle", {"c4140-1": FIXTURE_NODE, "c4140-2": SECOND_NODE})
    code = _check_from(bundle, "--json")
    out = strict_loads(capsys.readouterr().out)
    assert code == 1
    assert out["schema"] == "clusterctl.check-topology/1"
    assert out["bundle"] == str(bundle) and sorted(out["nodes"]) == ["c4140-1", "c4140-2"]
    node1 = {(f["severity"], f["code"]) for f in out["nodes"]["c4140-1"]["findings"]}
    node2 = {(f["severity"], f["code"]) for f in out["nodes"]["c4140-2"]["findings"]}
    assert {("info", "ib-port-down"), ("info", "gdr-usable"), ("error", "peermem-missing")} <= node1
    assert {("info", "ib-port-down"), ("warning", "gdr-not-used-topology")} <= node2
    assert "peermem-missing" not in {code for _, code in node2}  # its probe found nvidia_peermem
    assert ("error", "ipoib-address-mismatch") in node1 & node2  # the captured sample has no ib0
    assert {f["code"] for f in out["cluster_findings"]} == {"ofed-version-unexpected"}  # both 4.7-1.0.0.1


def test_check_topology_from_reports_an_inventory_node_the_bundle_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clusterctl.diagnostics.collect.collect", _no_collection)
    bundle = saved_topology(tmp_path / "run" / "topology", {"c4140-2": SECOND_NODE})
    assert _check_from(bundle, "--json") == 1
    out = strict_loads(capsys.readouterr().out)
    assert out["nodes"]["c4140-1"]["findings"] == [
        {
            "severity": "warning",
            "code": "node-not-in-bundle",
            "message": "the bundle holds nothing from this node, so it was not judged",
            "advice": "Collect a bundle of every node (`clusterctl collect -o DIR`) to judge it too.",
            "node": "c4140-1",
        }
    ]
    assert "gdr-not-used-topology" in {f["code"] for f in out["nodes"]["c4140-2"]["findings"]}
    assert _check_from(bundle, "-v") == 1  # the tables, with a row per inventory node
    captured = capsys.readouterr()
    assert "c4140-1" in captured.out and "GPU to nearest NIC" in captured.out
    assert f"bundle judged from {bundle}" in captured.err


def _bad_inputs(root: Path) -> dict[str, tuple[list[str], Path]]:
    """Each bad --from case: its extra arguments and the path the message must name."""
    (root / "not-a-bundle" / "c4140-1").mkdir(parents=True)
    (root / "not-a-bundle" / "c4140-1" / "ibstat.txt").write_text("CA 'mlx5_0'\n")
    other = saved_topology(root / "other-cluster", {"node1": FIXTURE_NODE, "c4140-1": FIXTURE_NODE})
    mine = saved_topology(root / "mine", {"c4140-1": FIXTURE_NODE})
    return {
        "missing": ([], root / "absent"),
        "not-a-bundle": ([], root / "not-a-bundle"),
        "other-nodes": ([], other),
        "with-bundle": (["--bundle", str(root / "new")], mine),
        "with-timeout": (["--timeout", "30"], mine),
    }


@pytest.mark.parametrize("case", ["missing", "not-a-bundle", "other-nodes", "with-bundle", "with-timeout"])
def test_check_topology_from_bad_input_exits_2_naming_the_path(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clusterctl.diagnostics.collect.collect", _no_collection)
    extra, path = _bad_inputs(tmp_path)[case]
    assert _check_from(path, "--json", *extra) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    message = " ".join(captured.err.split())
    assert str(path) in message and "Fix:" in message
    if case == "other-nodes":
        assert "node1" in message and "c4140-1, c4140-2" in message
    assert not (tmp_path / "new").exists()


def test_a_runs_snapshot_gives_the_findings_of_its_nodes_only(tmp_path: Path) -> None:
    """What the run judge gets from the run's topology/: c4140-1's findings (peer memory among them),
    no 'node-not-in-bundle' for the node the run did not use; an unreadable snapshot is one warning."""
    from clusterctl.diagnostics.check import snapshot_findings

    inventory = _paper(tmp_path)
    directory = write_bundle(tmp_path / "topology", {"c4140-1": topology_bundle("c4140-1", FIXTURE_NODE)})
    findings = snapshot_findings(inventory, directory)
    assert ("error", "peermem-missing", "c4140-1") in _codes(findings)
    assert {f.node for f in findings} == {"c4140-1"}
    [unreadable] = snapshot_findings(inventory, tmp_path / "absent")
    assert (unreadable.severity, unreadable.code) == ("warning", "snapshot-unreadable")


def test_status_bundles_beyond_keep_are_pruned_oldest_first_and_nothing_else(tmp_path: Path) -> None:
    stamps = [f"2026010{d}T120000Z" for d in range(1, 8)]
    for stamp in stamps:
        (tmp_path / stamp / "node1").mkdir(parents=True)
    (tmp_path / "my-notes").mkdir()  # not clusterctl's: never counted or removed
    (tmp_path / "20260101T120000Z.txt").write_text("a file, not a bundle")
    removed = prune_status_bundles(tmp_path, keep=3)
    assert [d.name for d in removed] == stamps[:4]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*stamps[4:], "my-notes", "20260101T120000Z.txt"]
    )
    assert prune_status_bundles(tmp_path, keep=3) == []  # at the bound: nothing more goes


def test_keep_bundles_is_validated_and_defaults_to_ten(tmp_path: Path) -> None:
    inv = load_inventory(REPO / "inventories" / "paper-c4140.yml")
    assert inv.state.keep_bundles == 10
    text = (REPO / "inventories" / "paper-c4140.yml").read_text() + "\nstate:\n  keep_bundles: 0\n"
    bad = tmp_path / "inv.yml"
    bad.write_text(text)
    with pytest.raises(InputError, match="keep_bundles"):
        load_inventory(bad)
