"""`clusterctl check health` on the 2-node sandbox (CPU, ethernet): healthy nodes exit 0; a node whose
kernel log holds a real Xid line (a dmesg stand-in on that node, since the machine has no GPU) fails,
and `--slurm-drain` drains exactly that node in the sandbox's real Slurm, with the finding as reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.cli import main
from tests.fixtures import fixture_text
from tests.integration.conftest import Sandbox, on_node
from tests.strictjson import strict_loads

pytestmark = pytest.mark.integration

FAKE_DMESG = "/usr/local/bin/dmesg"  # before /usr/bin on root's SSH PATH on the Debian nodes
FAKE_LOG = "/usr/local/share/clusterctl-test-kmsg"


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
