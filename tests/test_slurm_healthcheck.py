"""The Slurm health-check script (`check slurm-hc`): rendered per inventory, clean under shellcheck, every
command bounded (the sum well under Slurm's 60 s kill), and run here by bash with stand-ins for the
commands this machine lacks (dmesg, nvidia-smi, scontrol; the sysfs tree under a temporary root), fed with
real captured outputs: a healthy node exits 0 and drains nothing; an error Xid, a pending row remap, a port
down or slow each drain the node with the problem as the reason; the application's Xids (13, 45) never do;
an Xid drains once (the next check, with the kernel log unchanged, passes: a resumed node stays resumed);
each node is judged against its own inventory values."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterctl.check.drain import MAX_REASON, REASON_PREFIX
from clusterctl.check.healthcheck import (
    BOUND_S,
    DRAIN_XIDS,
    SLURM_HEALTH_CHECK_KILL_S,
    render_healthcheck,
)
from clusterctl.cli import main
from clusterctl.cli.slurm_hc import slurm_hc
from clusterctl.inventory import Inventory, validate_document
from clusterctl.yamlio import load_yaml
from tests.fixtures import fixture_text
from tests.helpers.health import HEALTHY_SMI, REMAP, XID79

ROOT = Path(__file__).resolve().parents[1]
MODERN = ROOT / "inventories" / "modern-h100.yml"
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
SHELLCHECK = Path("/usr/bin/shellcheck")


def _one_gpu_inventory(**second: Any) -> Inventory:
    """The H100 inventory with 1 GPU per node (the captured `nvidia-smi -q` outputs are of 1-GPU hosts)
    and two of its HCAs; ``second``: the second node's own values (gpus, fabric)."""
    document = load_yaml(MODERN)
    document["cluster"]["defaults"]["gpus"]["count"] = 1
    document["cluster"]["defaults"]["fabric"]["hca"] = ["mlx5_0", "mlx5_1:1"]
    for key, value in second.items():
        document["nodes"][1][key] = {**document["nodes"][1].get(key, {}), **value}
    return validate_document(document, MODERN)


@pytest.mark.parametrize("path", [MODERN, SANDBOX], ids=["gpu-ib", "cpu-ethernet"])
def test_the_script_passes_shellcheck_and_every_command_is_bounded(path: Path, tmp_path: Path) -> None:
    script = tmp_path / "hc.sh"
    assert main(["check", "slurm-hc", "-i", str(path), "-o", str(script)]) == 0
    assert os.access(script, os.X_OK)
    done = subprocess.run(
        [str(SHELLCHECK), str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
    text = script.read_text()
    for command in ("dmesg", "nvidia-smi", "scontrol"):
        calls = [
            ln
            for ln in text.splitlines()
            if re.search(rf"\b{command} ", ln) and not re.match(r"\s*(#|problem )", ln)
        ]
        assert calls or command == "nvidia-smi"
        for line in calls:
            assert re.search(rf"timeout -k 2 \d+ {command} ", line), line
    assert ("nvidia-smi -q" in text) == (path == MODERN)
    assert BOUND_S <= SLURM_HEALTH_CHECK_KILL_S * 2 / 3
    assert f"within {BOUND_S} s" in " ".join((slurm_hc.__doc__ or "").split())  # --help states the bound
    assert f"within {BOUND_S} s" in text


def _run(
    tmp_path: Path,
    dmesg: str,
    smi: str,
    ports: dict[str, tuple[str, str]],
    inventory: Inventory | None = None,
    node: str = "hgx-02",
    lang: str = "C",
) -> tuple[int, str | None]:
    """Run the rendered script with stand-ins, its cursor under ``tmp_path`` (kept between runs); (exit
    status, the scontrol command line or None)."""
    bin_dir, sysfs = tmp_path / "bin", tmp_path / "sys"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("dmesg", dmesg), ("nvidia-smi", smi)):
        (bin_dir / f"{name}.out").write_bytes(text.encode("utf-8", "surrogateescape"))
        (bin_dir / name).write_text(f'#!/bin/sh\ncat "{bin_dir}/{name}.out"\n')
    calls = tmp_path / "scontrol.calls"
    calls.unlink(missing_ok=True)
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> "{calls}"\n')
    for name in ("dmesg", "nvidia-smi", "scontrol"):
        (bin_dir / name).chmod(0o755)
    for hca, (state, rate) in ports.items():
        port = sysfs / hca / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "state").write_text(state + "\n")
        (port / "rate").write_text(rate + "\n")
    script = tmp_path / "hc.sh"
    script.write_text(render_healthcheck(inventory or _one_gpu_inventory()))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CLUSTERCTL_IB_SYSFS": str(sysfs),
        "CLUSTERCTL_HC_STATE": str(tmp_path / "state"),
        "SLURMD_NODENAME": node,
        "LANG": lang,
    }
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return done.returncode, calls.read_text() if calls.exists() else None


GOOD_PORTS = {"mlx5_0": ("4: ACTIVE", "400 Gb/sec (4X NDR)"), "mlx5_1": ("4: ACTIVE", "400 Gb/sec (4X NDR)")}


def test_a_healthy_node_exits_0_and_is_not_drained(tmp_path: Path) -> None:
    assert _run(tmp_path, "", fixture_text(HEALTHY_SMI), GOOD_PORTS) == (0, None)


@pytest.mark.parametrize(
    ("dmesg", "smi", "ports", "reason"),
    [
        (fixture_text(XID79), fixture_text(HEALTHY_SMI), GOOD_PORTS, "kernel log: SXid 20034 Xid 79"),
        ("", fixture_text(REMAP), GOOD_PORTS, "remapped rows pending on 1 GPU(s): reset the GPU"),
        ("", "", GOOD_PORTS, "0 of 1 GPUs visible"),
        ("", fixture_text(HEALTHY_SMI), {**GOOD_PORTS, "mlx5_1": ("1: DOWN", "10 Gb/sec (4X SDR)")},
         "mlx5_1 port 1 DOWN; mlx5_1 port 1 at 10 Gb/s, 400 expected"),
        ("", fixture_text(HEALTHY_SMI), {"mlx5_0": GOOD_PORTS["mlx5_0"]}, "mlx5_1 port 1 missing"),
    ],
    ids=["xid", "remap-pending", "gpu-missing", "port-down-slow", "port-missing"],
)  # fmt: skip
def test_a_problem_drains_the_node_with_it_as_the_reason(
    tmp_path: Path, dmesg: str, smi: str, ports: dict[str, tuple[str, str]], reason: str
) -> None:
    code, call = _run(tmp_path, dmesg, smi, ports)
    assert code == 1
    assert call is not None
    argv = call.rstrip("|").split("|")
    assert argv[:3] == ["update", "nodename=hgx-02", "state=drain"]
    assert argv[3].startswith(f"reason={REASON_PREFIX}") and reason in argv[3]
    assert len(argv[3]) - len("reason=") <= MAX_REASON


def test_an_xid_line_with_an_invalid_byte_still_drains_in_a_utf8_locale(tmp_path: Path) -> None:
    # A kernel line cut mid-character: GNU grep in a UTF-8 locale would call it binary and print nothing.
    line = "[ 3064.105371] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\udcff\n"
    code, call = _run(tmp_path, line, fixture_text(HEALTHY_SMI), GOOD_PORTS, lang="C.UTF-8")
    assert code == 1 and call is not None and "Xid 79" in call


XID13 = "kernel_log/gpud-xid13-graphics-exception-ctime-partial.txt"
XID45 = "kernel_log/forum-rtx2080ti-xid45-preemptive-cleanup-kernlog-partial.txt"
XID119 = "kernel_log/gpud-xid119-gsp-rpc-timeout-ctime.txt"


@pytest.mark.parametrize("fixture", [XID13, XID45])
def test_the_applications_xids_never_drain(tmp_path: Path, fixture: str) -> None:
    assert DRAIN_XIDS and not {13, 31, 43, 45} & set(DRAIN_XIDS)
    assert _run(tmp_path, fixture_text(fixture), fixture_text(HEALTHY_SMI), GOOD_PORTS) == (0, None)


def test_an_error_xid_drains_once_and_a_new_one_drains_again(tmp_path: Path) -> None:
    smi = fixture_text(HEALTHY_SMI)
    old = fixture_text(XID45) + fixture_text(XID79)
    code, call = _run(tmp_path, old, smi, GOOD_PORTS)
    assert code == 1 and call is not None and "kernel log: SXid 20034 Xid 79" in call
    # The admin resumes the node; the kernel still holds the lines: the next checks pass.
    (tmp_path / "scontrol.calls").unlink()
    assert _run(tmp_path, old, smi, GOOD_PORTS) == (0, None)
    assert _run(tmp_path, old, smi, GOOD_PORTS) == (0, None)
    # A new error Xid after them drains again, naming only it.
    code, call = _run(tmp_path, old + fixture_text(XID119), smi, GOOD_PORTS)
    assert code == 1 and call is not None and "reason=clusterctl health: kernel log: Xid 119|" in call


def test_each_node_is_judged_against_its_own_gpu_count_and_link_rate(tmp_path: Path) -> None:
    # hgx-01 has 8 GPUs at 400 Gb/s; hgx-02 (per-node values) 1 GPU at 200 Gb/s.
    inventory = _one_gpu_inventory(gpus={"count": 1}, fabric={"rate_gbps": 200})
    assert inventory.nodes[1].fabric.rate_gbps == 200
    smi = fixture_text(HEALTHY_SMI)
    hdr = {"mlx5_0": ("4: ACTIVE", "200 Gb/sec (4X HDR)"), "mlx5_1": ("4: ACTIVE", "200 Gb/sec (4X HDR)")}
    assert _run(tmp_path, "", smi, hdr, inventory, "hgx-02") == (0, None)
    code, call = _run(tmp_path, "", smi, hdr, inventory, "hgx-01")
    assert code == 1 and call is not None and "mlx5_0 port 1 at 200 Gb/s, 400 expected" in call


def test_a_node_outside_the_inventory_is_judged_by_its_kernel_log_only(tmp_path: Path) -> None:
    assert _run(tmp_path, "", "", {}, None, "login-01") == (0, None)
    assert _run(tmp_path, fixture_text(XID79), "", {}, None, "login-01")[0] == 1
