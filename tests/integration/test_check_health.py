"""`clusterctl check health` on the 2-node sandbox (CPU, ethernet): healthy nodes exit 0; a node whose
kernel log holds a real Xid line (a dmesg stand-in on that node, since the machine has no GPU) fails,
and `--slurm-drain` drains exactly that node in the sandbox's real Slurm, with the finding as reason.
The script of `check slurm-hc`, set as slurm.conf's HealthCheckProgram, is run by the real slurmd of
each node: an application Xid (45) leaves the node idle, an error Xid (79) drains it once, and the node an
admin resumes stays resumed while the kernel log still holds the line."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clusterctl.check.healthcheck import STATE_DIR
from clusterctl.cli import main
from tests.fixtures import fixture_text
from tests.helpers.sandbox import Sandbox, on_node
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration

FAKE_DMESG = "/usr/local/bin/dmesg"  # before /usr/bin on root's SSH PATH on the Debian nodes
FAKE_LOG = "/usr/local/share/clusterctl-test-kmsg"
HC_PATH = "/usr/local/sbin/clusterctl-healthcheck.sh"
HC_STATE = STATE_DIR  # the script's cursor on each node
HC_INTERVAL_S = 5
XID45 = "kernel_log/forum-rtx2080ti-xid45-preemptive-cleanup-kernlog-partial.txt"
XID79 = "kernel_log/gpud-xid79-fallen-off-bus-sxid20034-nvswitch-partial.txt"
SLURM_CONF = "/etc/slurm/slurm.conf"
# slurmd runs the program on `scontrol reconfigure`, then every interval; the drain shows within a second
# or two on an idle machine.
DRAIN_DEADLINE_S = 30


def _node_state(sandbox: Sandbox, node: str) -> tuple[str, str]:
    """(State, Reason) of ``node`` as slurmctld has it (Reason is the last field and may hold spaces)."""
    text = on_node(sandbox, sandbox.inventory.nodes[0].name, "scontrol", "show", "node", node, "--oneliner")
    state = text.split("State=", 1)[1].split()[0]
    reason = text.split("Reason=", 1)[1].rsplit(" [", 1)[0] if "Reason=" in text else ""
    return state, reason


@pytest.fixture
def xid_on_second_node(sandbox2: Sandbox) -> Iterator[str]:
    """The second node's dmesg prints a real captured Xid 79 line; removed (and the node resumed) after."""
    node = sandbox2.inventory.nodes[1].name
    xids = fixture_text("kernel_log/gpud-xid79-fallen-off-bus-sxid20034-nvswitch-partial.txt")
    line = next(ln for ln in xids.splitlines() if "Xid (PCI" in ln)
    script = f'printf "%s\\n" "$1" > {FAKE_LOG} && printf "#!/bin/sh\\ncat {FAKE_LOG}\\n" > {FAKE_DMESG} && chmod 755 {FAKE_DMESG}'
    on_node(sandbox2, node, "sh", "-c", script, "sh", line)
    try:
        yield node
    finally:
        on_node(sandbox2, node, "rm", "-f", FAKE_DMESG, FAKE_LOG)
        on_node(
            sandbox2,
            sandbox2.inventory.nodes[0].name,
            "scontrol",
            "update",
            f"nodename={node}",
            "state=resume",
            check=False,
        )


def test_healthy_sandbox_exits_0_with_one_ok_verdict_per_node(
    sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", "health", "-i", str(sandbox2.inventory_path), "--bundle", str(tmp_path), "--json"])
    out = strict_loads(capsys.readouterr().out)
    assert code == 0, out
    assert {name: n["verdict"] for name, n in out["nodes"].items()} == {
        n.name: "ok" for n in sandbox2.inventory.nodes
    }
    meta = json.loads((tmp_path / sandbox2.inventory.nodes[0].name / "meta.json").read_text())
    assert meta["sections"]["lspci-vvv"]["status"] == "ok"  # the one check a CPU node needs looked


def test_slurm_drain_drains_only_the_node_with_the_xid(
    sandbox2: Sandbox, xid_on_second_node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = xid_on_second_node
    good = sandbox2.inventory.nodes[0].name
    code = main(
        [
            "check",
            "health",
            "-i",
            str(sandbox2.inventory_path),
            "--bundle",
            str(tmp_path),
            "--json",
            "--slurm-drain",
        ]
    )
    out = strict_loads(capsys.readouterr().out)
    assert code == 1
    assert out["nodes"][good]["verdict"] == "ok" and out["nodes"][bad]["verdict"] == "fail"
    assert [f["code"] for f in out["nodes"][bad]["findings"] if f["severity"] == "error"] == ["xid-79"]
    assert [(a["node"], a["state"], a["ok"]) for a in out["slurm"]] == [(bad, "drain", True)]
    state, reason = _node_state(sandbox2, bad)
    assert "DRAIN" in state and reason.startswith("clusterctl health: xid-79: Xid 79")
    assert _node_state(sandbox2, good)[0] == "IDLE"

    # Resumed only on request.
    assert (
        main(
            [
                "check",
                "health",
                "-i",
                str(sandbox2.inventory_path),
                "--from",
                str(tmp_path),
                "--json",
                "--slurm-resume",
                bad,
            ]
        )
        == 1
    )
    resumed = strict_loads(capsys.readouterr().out)["slurm"]
    assert [(a["node"], a["state"], a["ok"]) for a in resumed] == [(bad, "resume", True)]
    assert "DRAIN" not in _node_state(sandbox2, bad)[0]


def _set_kernel_log(sandbox: Sandbox, node: str, text: str) -> None:
    """``node``'s dmesg stand-in prints ``text`` (the kernel keeps its lines: a later log holds the earlier)."""
    script = f'printf "%s\\n" "$1" > {FAKE_LOG} && printf "#!/bin/sh\\ncat {FAKE_LOG}\\n" > {FAKE_DMESG} && chmod 755 {FAKE_DMESG}'
    on_node(sandbox, node, "sh", "-c", script, "sh", text)


def _xid_lines(fixture: str) -> str:
    return "\n".join(ln for ln in fixture_text(fixture).splitlines() if "Xid (PCI" in ln)


@pytest.fixture
def healthcheck_program(sandbox2: Sandbox, tmp_path: Path) -> Iterator[str]:
    """`check slurm-hc`'s script on every node as slurm.conf's HealthCheckProgram (`scontrol reconfigure`),
    the second node's kernel log a dmesg stand-in; slurm.conf restored (and reconfigured), the stand-in and
    the script's cursor removed and the node resumed after."""
    script = tmp_path / "healthcheck.sh"
    assert main(["check", "slurm-hc", "-i", str(sandbox2.inventory_path), "-o", str(script)]) == 0
    install = 'printf "%s" "$1" > "$2" && chmod 755 "$2"'
    node = sandbox2.inventory.nodes[1].name
    _set_kernel_log(sandbox2, node, "")
    for each in sandbox2.inventory.nodes:
        on_node(sandbox2, each.name, "rm", "-rf", HC_STATE)
        on_node(sandbox2, each.name, "sh", "-c", install, "sh", script.read_text(), HC_PATH)
    controller = sandbox2.inventory.nodes[0].name
    conf = on_node(sandbox2, controller, "cat", SLURM_CONF)
    wanted = f"{conf}HealthCheckProgram={HC_PATH}\nHealthCheckInterval={HC_INTERVAL_S}\n"
    write = 'printf "%s" "$1" > "$2" && scontrol reconfigure'
    on_node(sandbox2, controller, "sh", "-c", write, "sh", wanted, SLURM_CONF)
    try:
        yield node
    finally:
        on_node(sandbox2, controller, "sh", "-c", write, "sh", conf, SLURM_CONF)
        for each in sandbox2.inventory.nodes:
            on_node(sandbox2, each.name, "rm", "-rf", HC_PATH, HC_STATE)
        on_node(sandbox2, node, "rm", "-f", FAKE_DMESG, FAKE_LOG)
        on_node(sandbox2, controller, "scontrol", "update", f"nodename={node}", "state=resume", check=False)


def _judged(sandbox: Sandbox, node: str) -> str:
    """The Xid lines the node's health check has judged (its cursor); "" before its first look."""
    return on_node(sandbox, node, "sh", "-c", f"cat {HC_STATE}/xid-lines 2>/dev/null || true")


def _wait(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DRAIN_DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"not within {DRAIN_DEADLINE_S} s: {what}"
        time.sleep(0.5)


def test_slurmd_runs_the_generated_healthcheck_which_drains_once_for_an_error_xid_only(
    sandbox2: Sandbox, healthcheck_program: str
) -> None:
    bad = healthcheck_program
    good = sandbox2.inventory.nodes[0].name
    controller = good
    # Xid 45 (what any killed CUDA process leaves): judged, and the node stays idle.
    xid45 = _xid_lines(XID45)
    _set_kernel_log(sandbox2, bad, xid45)
    _wait("the Xid 45 lines judged", lambda: "Xid (PCI:0000:02:00): 45" in _judged(sandbox2, bad))
    assert _node_state(sandbox2, bad)[0] == "IDLE"
    # Xid 79 (fallen off the bus) and fatal SXid 20034 after it: drained once, with them as the reason.
    _set_kernel_log(sandbox2, bad, xid45 + "\n" + _xid_lines(XID79))
    _wait("the node drained", lambda: "DRAIN" in _node_state(sandbox2, bad)[0])
    assert _node_state(sandbox2, bad)[1] == "clusterctl health: kernel log: SXid 20034 Xid 79"
    # slurmd itself ran it (its log has the program's exit status and output) ...
    assert f"health_check failed: rc:1 output:drained {bad}:" in on_node(
        sandbox2, bad, "cat", "/var/log/slurm/slurmd.log"
    )
    # ... an admin resumes the node: the kernel still holds the line, and the node stays resumed through
    # the next checks (slurmd's own runs, and one run here as slurmd runs it, which exits 0).
    on_node(sandbox2, controller, "scontrol", "update", f"nodename={bad}", "state=resume")
    time.sleep(3 * HC_INTERVAL_S)
    on_node(sandbox2, bad, "env", f"SLURMD_NODENAME={bad}", HC_PATH)
    assert _node_state(sandbox2, bad)[0] == "IDLE"
    # The healthy node's copy, run as slurmd runs it (root, SLURMD_NODENAME), passes.
    on_node(sandbox2, good, "env", f"SLURMD_NODENAME={good}", HC_PATH)
    assert _node_state(sandbox2, good)[0] == "IDLE"
