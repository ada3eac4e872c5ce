"""Every command's human output at 80 columns: verdict first, nothing cut to an ellipsis.

The CLI runs with COLUMNS=80 (what a pipe or a small terminal gives rich) on real data: `check topology`
on a bundle collected from a real 2-node sandbox (tests/fixtures/bundles/) and on the captured GPU/IB
outputs of tests/fixtures, `inspect` on captured outputs, `report` on real run directories; `status`,
`provision`'s recap and `image push` print through their renderers with the shapes their commands give
them (the live commands run in tests/integration)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.cli.image import print_deliveries
from clusterctl.image.distribute import DeliveryResult
from tests.helpers.topology import FIXTURE_NODE, PAPER_C4140, SECOND_NODE, saved_topology

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SANDBOX_BUNDLE = FIXTURES / "bundles" / "sandbox-cpu-2node"
RUNS = FIXTURES / "runs"
ELLIPSIS = "\u2026"
# An inventory of the sandbox's kind (CPU nodes, ethernet eth0), its addresses left unset.
CPU_NODES = "cluster:\n  name: cpus\n  defaults:\n    gpus: {count: 0}\n    fabric: {kind: ethernet, interface: eth0}\n"


@pytest.fixture(autouse=True)
def columns_80(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console as COLUMNS=80 makes it (rich reads COLUMNS when a console is made, so the
    modules' console is made again)."""
    from rich.console import Console

    monkeypatch.setenv("COLUMNS", "80")
    narrow = Console(soft_wrap=True, emoji=False)
    assert narrow.width == 80
    for module in ("common", "check", "image", "inspect", "lifecycle", "provision", "run"):
        monkeypatch.setattr(f"clusterctl.cli.{module}.console", narrow)


def _readable(out: str) -> list[str]:
    """The output's lines, after checking none is cut to an ellipsis."""
    assert ELLIPSIS not in out, out
    return out.splitlines()


def _cpu_bundle(root: Path, count: int) -> tuple[Path, Path]:
    """``count`` copies of the sandbox's node1 bundle as nodes n01.., and an inventory of them."""
    nodes = []
    for i in range(1, count + 1):
        name = f"n{i:02d}"
        shutil.copytree(SANDBOX_BUNDLE / "node1", root / "bundle" / name)
        meta = root / "bundle" / name / "meta.json"
        meta.write_text(json.dumps(json.loads(meta.read_text()) | {"node": name}))
        role = ", role: primary" if i == 1 else ""
        nodes.append(f"  - {{name: {name}, address: 10.0.0.{i}{role}}}\n")
    inventory = root / "inventory.yml"
    inventory.write_text(CPU_NODES + "nodes:\n" + "".join(nodes))
    return root / "bundle", inventory


# ------------------------------------------------------------------------------------ check topology


@pytest.mark.parametrize("count", [2, 16])
def test_a_healthy_cpu_cluster_is_a_summary_and_one_folded_line(
    count: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, inventory = _cpu_bundle(tmp_path, count)
    assert main(["check", "topology", "-i", str(inventory), "--from", str(bundle)]) == 0
    lines = _readable(capsys.readouterr().out)
    assert re.fullmatch(rf"{count} nodes: {count} ok; \d+ info \(-v shows the info\)", lines[0])
    assert lines[1:] == [f"n[01-{count:02d}]  ok"]


def test_verbose_shows_the_tables_and_every_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, inventory = _cpu_bundle(tmp_path, 2)
    assert main(["check", "topology", "-i", str(inventory), "--from", str(bundle), "-v"]) == 0
    out = capsys.readouterr().out
    for title in ("reachability and tools", "IB ports (ibstat)", "GPU to nearest NIC", "versions",
                  "fabric addressing", "findings"):  # fmt: skip
        assert title in out
    assert "tool-missing" in out and out.splitlines()[1:3] == ["n01  ok", "n02  ok"]  # every node


def test_a_failing_node_leads_with_its_verdict_and_its_findings_read_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = saved_topology(tmp_path / "bundle", {"c4140-1": FIXTURE_NODE, "c4140-2": SECOND_NODE})
    assert main(["check", "topology", "-i", str(PAPER_C4140), "--from", str(bundle), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert main(["check", "topology", "-i", str(PAPER_C4140), "--from", str(bundle)]) == 1
    lines = _readable(capsys.readouterr().out)
    every = [f for n in found["nodes"].values() for f in n["findings"]] + found["cluster_findings"]
    assert re.fullmatch(
        r"2 nodes: 2 FAIL; \d+ errors, \d+ warnings, \d+ info \(-v shows the info\)", lines[0]
    )
    for i, name in enumerate(("c4140-1", "c4140-2"), start=1):
        mine = [f for f in every if f["node"] == name and f["severity"] != "info"]
        errors = sum(f["severity"] == "error" for f in mine)
        assert lines[i].startswith(f"{name}    FAIL  {errors} errors")
    assert all(len(line) <= 80 for line in lines)  # messages wrapped under their codes
    assert "error    c4140-[1-2]  tool-missing" in lines  # the same finding on both nodes: one group
    shown = "\n".join(lines)
    for f in every:
        assert (f["code"] in shown) == (f["severity"] != "info" or f["code"] in {
            g["code"] for g in every if g["severity"] != "info"})  # fmt: skip
    assert "peermem-missing" in shown and "gdr-usable" not in shown  # an info only with -v


# ------------------------------------------------------------------------------------ the others


def test_inspect_leads_with_each_files_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    down = FIXTURES / "ibstat" / "gpud-h100-12ca-roce-two-cx7-down-disabled.txt"
    topo = FIXTURES / "nvidia_smi_topo" / "msccl-dgx1-8gpu-nv1nv2-4nic-phb.txt"
    assert main(["inspect", str(down), str(topo)]) == 1
    lines = _readable(capsys.readouterr().out)
    assert lines[0].startswith(f"{down}  FAIL  kind: ibstat")
    assert lines[1] == "error    ib-port-down"
    assert any(line.startswith(f"{topo}  ok  kind: nvidia-smi-topo") for line in lines)


def test_report_of_real_runs_is_whole_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    assert main(["report", "--runs-dir", str(runs)]) == 0
    lines = _readable(capsys.readouterr().out)
    assert any("resnet50" in line for line in lines)


def test_image_push_is_a_line_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    image = "sha256:866bc3f5a844" + "0" * 52
    print_deliveries(image, {
        "node1": DeliveryResult("node1", "delivered", image, 461_821_005, 145.4, compression="zstd"),
        "node2": DeliveryResult("node2", "skipped", image),
        "node3": DeliveryResult("node3", "failed", None, error="connection refused by 10.231.7.13:22"),
    })  # fmt: skip
    lines = _readable(capsys.readouterr().out)
    assert lines == [
        "node1  delivered  461,821,005 bytes in 145.4 s, zstd; verified 866bc3f5a844",
        "node2  skipped    already there",
        "node3  failed     connection refused by 10.231.7.13:22",
        "image 866bc3f5a844: 1 of 3 node(s) failed (node3); 461,821,005 bytes moved",
    ]


def test_provision_recap_is_a_verdict_line_per_host(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.provision import _print_recap
    from clusterctl.provision.executor import HostStepResult, ProvisionReport

    data = json.loads((FIXTURES / "sandbox_json" / "provision-2node.json").read_text())
    steps = [HostStepResult(**step) for step in data["steps"]]
    steps[0].status, steps[0].reason = "failed", "apt-get exited 100"  # one failed step: its host fails
    _print_recap(ProvisionReport(data["playbook"], data["dry_run"], steps))
    assert _readable(capsys.readouterr().out) == [
        "recap: host-setup",
        "2 nodes: 1 FAIL, 1 ok",
        "node1  FAIL  5 ok, 1 failed, 10 skipped",
        "node2  ok    6 ok, 10 skipped",
    ]


@pytest.mark.parametrize("verbose", [False, True])
def test_status_is_a_verdict_line_per_node(verbose: bool, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.lifecycle import print_statuses
    from clusterctl.containers.lifecycle import ContainerStatus

    data = json.loads((FIXTURES / "sandbox_json" / "status-2node.json").read_text())
    statuses = {
        n["node"]: ContainerStatus(**{k: v for k, v in n.items() if k != "ok"}) for n in data["nodes"]
    }
    statuses["node2"].error = "docker engine did not answer on 10.231.7.12:2376"
    print_statuses(data["image"], statuses, verbose=verbose)
    lines = _readable(capsys.readouterr().out)
    assert lines[0] == "1 of 2 nodes ready to run clusterctl/glance:cpu-06336531246b"
    ok, fail = (
        "node1  ok    container running, sshd answering",
        "node2  FAIL  docker engine did not answer on 10.231.7.12:2376",
    )
    if verbose:  # every node, in inventory order, with its detail
        assert lines[1:3] == [ok, "  primary; container clusterctl-glance-node1; image 866bc3f5a844"]
        assert lines[3] == fail
    else:  # the nodes that need a look first
        assert lines[1:] == [fail, ok]


def test_a_run_record_is_one_verdict_line_and_its_detail(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.run import _print_record
    from clusterctl.results.record import RunRecord

    run = RUNS / "20261125T170753Z_resnet50_2n"
    _print_record(RunRecord.model_validate_json((run / "result.json").read_text()), run)
    lines = _readable(capsys.readouterr().out)
    assert lines[0].startswith("valid 20261125T170753Z_resnet50_2n: total_images_per_sec 3.01 img/s")


def test_collect_is_a_verdict_line_per_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = tmp_path / "inv.yml"  # nothing listens on port 1: the node cannot be reached
    inventory.write_text(
        "cluster:\n  name: collect-80\n  defaults:\n    ssh: {port: 1, connect_timeout_s: 2}\n"
        "nodes:\n  - {name: n1, address: 127.0.0.1, role: primary}\n"
    )
    assert main(["collect", "-i", str(inventory), "-o", str(tmp_path / "b"), "--timeout", "5"]) == 1
    lines = _readable(capsys.readouterr().out)
    assert lines[0].startswith("n1  FAIL  ") and lines[-1] == f"bundle written to {tmp_path / 'b'}"
