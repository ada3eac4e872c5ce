"""The human outputs at 128 and 256 nodes: the summary first, then only the nodes that need a look, the
nodes that say the same folded into Slurm's hostlist form (``node[001-127]  ok``), a screen at most;
``--verbose`` keeps a line per node. `check health` runs end to end on bundles of real captured outputs;
the others print synthetic per-node results through their renderers (the live commands run in
tests/integration)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
from rich.console import Console

from clusterctl.cli import main
from clusterctl.diagnostics.bundle import write_bundle
from clusterctl.findings import Finding
from tests.helpers.health import HEALTHY, INVENTORY, XID79, health_bundle

SCREEN = 24  # lines: what "fits one screen" means here
TOOL = "lspci is not installed, so `lspci -vvv` gave no data"


@pytest.fixture
def console80(monkeypatch: pytest.MonkeyPatch) -> Console:
    """The CLI modules' console as COLUMNS=80 makes it."""
    monkeypatch.setenv("COLUMNS", "80")
    narrow = Console(soft_wrap=True, emoji=False)
    for module in ("common", "check", "lifecycle", "provision", "sandbox"):
        monkeypatch.setattr(f"clusterctl.cli.{module}.console", narrow)
    return narrow


def _names(count: int) -> list[str]:
    return [f"node{i:03d}" for i in range(1, count + 1)]


def _expand(text: str) -> set[str]:
    return set(NodeSet(text, resolver=RESOLVER_NOGROUP))


def _fits(out: str) -> list[str]:
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    return lines


# ------------------------------------------------------------------------------------ check topology


def _topology(count: int, odd: tuple[str, ...] = ()) -> dict[str, list[Finding]]:
    """Every node with the same info and tool-missing warning, node017 with an error, node100 clean."""
    per_node: dict[str, list[Finding]] = {}
    for name in [*_names(count), *odd]:
        found = [Finding(severity="info", code="gdr-usable", message="GPUDirect RDMA usable", node=name)]
        if name != "node100":
            found.append(Finding(severity="warning", code="tool-missing", message=TOOL, node=name))
        if name == "node017":
            found.append(
                Finding(severity="error", code="ib-port-down", message="mlx5_0 port 1 down", node=name)
            )
        per_node[name] = found
    return per_node


@pytest.mark.parametrize("count", [128, 256])
def test_topology_at_scale_is_a_summary_then_the_nodes_that_differ(
    count: int, console80: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl.cli.verdicts import CLUSTER, print_findings, print_summary, print_verdicts, summary_line

    per_node = _topology(count, odd=("login", "gpu-a")) | {CLUSTER: []}
    print_summary(console80, summary_line(per_node))
    print_verdicts(console80, per_node)
    print_findings(console80, [f for found in per_node.values() for f in found if f.severity != "info"])
    lines = _fits(capsys.readouterr().out)
    assert lines[:2] == [  # the summary wrapped to 80 columns, the parenthesis whole
        f"{count + 2} nodes: 1 FAIL, {count} WARN, 1 ok; 1 error, {count + 1} warnings, {count + 2} info",
        "  (-v shows the info)",
    ]
    rest = f"node[001-016,018-099,101-{count}]"
    assert lines[2:5] == [
        "node017  FAIL  1 error, 1 warning",
        f"gpu-a,login,{rest}  WARN  1 warning",  # longer than the name column: not padded to
        "node100  ok",
    ]
    assert "warning  gpu-a,login,node[001-099,101-" in lines[7]  # one group for the shared warning
    assert len(lines) < SCREEN
    named = set().union(*(_expand(line.split()[0]) for line in lines[2:5]))
    assert named == set(_names(count)) | {"login", "gpu-a"}


@pytest.mark.parametrize("count", [128, 256])
def test_scattered_failures_get_lines_of_their_own_at_80_columns(
    count: int, console80: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl.cli.verdicts import print_verdicts

    bad = Finding(severity="error", code="ib-port-down", message="mlx5_0 port 1 down")
    per_node = {
        name: [bad.model_copy(update={"node": name})] if i % 2 else [] for i, name in enumerate(_names(count))
    }
    print_verdicts(console80, per_node)
    lines = _fits(capsys.readouterr().out)
    fail_end = next(i for i, line in enumerate(lines) if "FAIL" in line)
    assert lines[fail_end].endswith("  FAIL  1 error") and all(
        line.endswith(",") for line in lines[:fail_end]
    )
    failed = set().union(*(_expand(line.split()[0].rstrip(",")) for line in lines[: fail_end + 1]))
    assert failed == set(_names(count)[1::2])
    passed = set().union(*(_expand(line.split()[0].rstrip(",")) for line in lines[fail_end + 1 :]))
    assert passed == set(_names(count)[::2]) and lines[-1].endswith("  ok")


def test_verbose_keeps_a_line_per_node(console80: Console, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.verdicts import print_verdicts

    print_verdicts(console80, _topology(128), every=True)
    lines = _fits(capsys.readouterr().out)
    assert [line.split()[0] for line in lines] == _names(128)


# ------------------------------------------------------------------------------------ check health


def _health_inventory(path: Path, count: int) -> Path:
    text = INVENTORY.read_text()
    head, _, tail = text.partition("\nnodes:\n")
    tail = tail[tail.index("\ncontainer:") :]
    nodes = "".join(
        f"  - {{name: hgx-{i:03d}, address: 10.20.{i // 250}.{i % 250 + 1}"
        f"{', role: primary' if i == 1 else ''}, fabric: {{address: 10.21.{i // 250}.{i % 250 + 1}/16}}}}\n"
        for i in range(1, count + 1)
    )
    path.write_text(f"{head}\nnodes:\n{nodes}{tail}")
    return path


def test_health_at_128_nodes_fits_a_screen_and_names_each_node_that_needs_a_look(
    tmp_path: Path, console80: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    count = 128
    inventory = _health_inventory(tmp_path / "inventory.yml", count)
    bundles = {f"hgx-{i:03d}": health_bundle(f"hgx-{i:03d}", HEALTHY) for i in range(1, count + 1) if i != 64}
    bundles["hgx-007"] = health_bundle("hgx-007", {**HEALTHY, "kernel-log": XID79})  # an Xid 79: fail
    bundles["hgx-099"] = health_bundle(
        "hgx-099", HEALTHY, failed={"kernel-log": "dmesg: Operation not permitted"}
    )
    write_bundle(tmp_path / "bundle", bundles)  # hgx-064 did not answer: not in the bundle
    assert main(["check", "health", "-i", str(inventory), "--from", str(tmp_path / "bundle")]) == 1
    lines = _fits(capsys.readouterr().out)
    assert re.fullmatch(rf"{count} nodes: 1 FAIL, 2 UNKNOWN, 125 OK; \d+ errors?, \d+ warnings?", lines[0]), (
        lines[0]
    )
    assert lines[1].startswith("hgx-007  FAIL     xid-79: ")
    assert lines[2].startswith("hgx-064  UNKNOWN  ")
    assert lines[3].startswith("hgx-099  UNKNOWN  could not check: kernel-log")
    assert lines[4].startswith("hgx-[001-006,008-063,065-098,100-128]  OK       healthy")
    assert len(lines) < 2 * SCREEN  # the findings wrapped under their codes, not a 5-column table

    assert main(["check", "health", "-i", str(inventory), "--from", str(tmp_path / "bundle"), "-v"]) == 1
    every = _fits(capsys.readouterr().out)
    assert [line.split()[0] for line in every[1 : count + 1]] == [f"hgx-{i:03d}" for i in range(1, count + 1)]


def test_health_of_64_cpu_nodes_one_unreachable_fits_a_screen(
    tmp_path: Path, console80: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41's acceptance, from a real sandbox's health bundle: one node's sshd stopped is one line
    and the 63 others are judged, the whole output on one screen."""
    import json
    import shutil

    source = Path(__file__).parent / "fixtures" / "bundles" / "sandbox-cpu-2node-health" / "node1"
    nodes = []
    for i in range(1, 65):
        name = f"n{i:02d}"
        shutil.copytree(source, tmp_path / "bundle" / name)
        meta = tmp_path / "bundle" / name / "meta.json"
        document = json.loads(meta.read_text()) | {"node": name}
        if i == 17:  # what collect records for a node whose sshd does not answer
            for output in meta.parent.glob("*.txt"):
                output.unlink()
            document |= {"unreachable": True, "sections": {},
                         "error": "ssh: connect to 10.0.0.17:22: Connection refused"}  # fmt: skip
        meta.write_text(json.dumps(document))
        nodes.append(f"  - {{name: {name}, address: 10.0.0.{i}{', role: primary' if i == 1 else ''}}}\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "cluster:\n  name: light\n  defaults:\n    gpus: {count: 0}\n    fabric: {kind: ethernet, interface: eth0}\n"
        "nodes:\n" + "".join(nodes)
    )
    assert main(["check", "health", "-i", str(inventory), "--from", str(tmp_path / "bundle")]) == 1
    lines = _fits(capsys.readouterr().out)
    assert lines[0].startswith("64 nodes: 1 UNKNOWN, 63 OK; ")
    assert lines[1].startswith("n17             UNKNOWN  ")
    assert lines[2].startswith("n[01-16,18-64]  OK       healthy")
    assert len(lines) <= SCREEN and not any(line.startswith("n") for line in lines[3:]), lines


# ------------------------------------------------------------------------------------ provision, status


@pytest.mark.parametrize("count", [128, 256])
def test_provision_recap_at_scale(count: int, console80: Console, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.provision import _print_recap
    from clusterctl.provision.executor import HostStepResult, ProvisionReport

    steps = [
        HostStepResult(name, step, "failed" if (name, step) == ("node042", "docker") else "ok")
        for step in ("packages", "hostname", "docker")
        for name in _names(count)
    ] + [HostStepResult(name, "mofed", "skipped") for name in _names(count)]
    _print_recap(ProvisionReport("host-setup", False, steps))
    lines = _fits(capsys.readouterr().out)
    assert lines == [
        "recap: host-setup",
        f"{count} nodes: 1 FAIL, {count - 1} ok",
        f"{'node042'.ljust(21)}  FAIL  2 ok, 1 failed, 1 skipped",
        f"node[001-041,043-{count}]  ok    3 ok, 1 skipped",
    ]
    _print_recap(ProvisionReport("host-setup", False, steps), every=True)
    assert len(capsys.readouterr().out.splitlines()) == count + 2


@pytest.mark.parametrize("count", [128, 256])
def test_status_at_scale(count: int, console80: Console, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.lifecycle import print_statuses
    from clusterctl.containers.lifecycle import ContainerStatus

    statuses = {
        name: ContainerStatus(name, "secondary", "sha256:" + "a" * 64, f"c-{name}", "running", "answering")
        for name in _names(count)
    }
    statuses["node128"].error = "ssh: connection refused by 10.0.0.128:22"
    print_statuses("img:1", statuses, verbose=False)
    ok = "node[001-127]" if count == 128 else f"node[001-127,129-{count}]"
    assert _fits(capsys.readouterr().out) == [
        f"{count - 1} of {count} nodes ready to run img:1",
        f"{'node128'.ljust(len(ok))}  FAIL  ssh: connection refused by 10.0.0.128:22",
        f"{ok}  ok    container running, sshd answering",
    ]


def test_sandbox_status_at_scale(console80: Console, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.sandbox import _show
    from clusterctl.sandbox.cluster import NodeStatus, SandboxStatus

    nodes = [NodeStatus(f"node{i}", f"clusterctl-fold-node{i}", f"172.28.0.{10 + i}", "running", True, str(i % 2))
             for i in range(1, 129)]  # fmt: skip
    nodes[4].state, nodes[4].sshd = "exited", False
    _show(SandboxStatus("fold", "degraded", nodes, network="n", subnet="172.28.0.0/24"))
    lines = capsys.readouterr().out.splitlines()
    paths = ("inventory:", "identity:", "known_hosts:")  # the state directory's own length
    assert all(len(line) <= 80 for line in lines if not line.startswith(paths)), lines
    assert lines[:3] == [
        "sandbox fold: degraded; 128 nodes: 1 FAIL, 127 ok",
        "node5            FAIL  exited, sshd not answering",
        "node[1-4,6-128]  ok    running, sshd answering",
    ]
    _show(SandboxStatus("fold", "degraded", nodes, network="n", subnet="172.28.0.0/24"), verbose=True)
    rows = re.findall(r"^\S (node\d+) ", capsys.readouterr().out, re.MULTILINE)
    assert rows == [f"node{i}" for i in range(1, 129)]  # the table of every node


@pytest.mark.parametrize("every", [False, True])
def test_provision_live_feed_prints_what_needs_a_look(
    every: bool, console80: Console, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl.cli.provision import _Live
    from clusterctl.provision.executor import HostStepResult, Status

    live = _Live(every=every)
    odd: dict[str, Status] = {"node042": "failed", "node077": "unreachable", "node100": "changed"}
    for step in ("packages", "hostname", "docker"):
        for name in _names(128):
            status = odd.get(name, "ok")
            live(HostStepResult(name, step, "skipped" if step == "docker" and status == "ok" else status))
    lines = _fits(capsys.readouterr().out)
    if every:  # every outcome, the unreachable host once
        assert len(lines) == 3 * 127 + 1
    else:
        assert [line.split()[:2] for line in lines] == [
            ["failed", "node042:"], ["unreachable", "node077:"], ["changed", "node100:"],
            ["failed", "node042:"], ["changed", "node100:"], ["failed", "node042:"], ["changed", "node100:"],
        ]  # fmt: skip
