"""Provision and `check topology` on GPUDirect's two paths and the NVSwitch fabric, over real captures:
DOCA-OFED recognised by the mofed step and never installed over; DMA-BUF (open kernel modules, Linux
5.12+, NCCL 2.13+) passing GPUDirect without peer memory in the step and in the rules alike; NVSwitches
found on the PCI bus when nvidia-smi -q says nothing, and the fabric healthy only at Completed/Success.

The playbook's probes run in a real shell, with stand-ins on PATH for the tools this machine lacks
(ofed_info, modinfo, lspci, nvidia-smi), each printing a real capture."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterctl.diagnostics.bundle import SectionMeta
from clusterctl.diagnostics.collectors import COLLECTOR_BY_KEY
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.nccl_gdr import dmabuf_path
from clusterctl.diagnostics.nvswitch import nvswitches_on_bus
from clusterctl.diagnostics.parsers.lspci import parse_lspci
from clusterctl.diagnostics.parsers.modinfo import parse_modinfo
from clusterctl.diagnostics.parsers.nvidia_smi_q import SmiQGpu, parse_nvidia_smi_q
from clusterctl.diagnostics.parsers.ofed_info import parse_ofed_info
from clusterctl.diagnostics.parsers.peermem import parse_peermem
from clusterctl.diagnostics.rules import Expectation
from clusterctl.diagnostics.rules_host import smi_q_rules
from clusterctl.diagnostics.rules_node import fabric_manager_rules, peermem_rules, section_findings
from clusterctl.inventory import Inventory, load_inventory
from clusterctl.paths import data_dir
from clusterctl.provision.plan import step_context
from clusterctl.provision.playbook import load_playbook, render_step, select_steps
from tests.fixtures import FIXTURES, fixture_text

OPEN = "modinfo/aikitoria-issue15-590-open-dual-mit-gpl-dma-buf-6.8-partial.txt"
PROPRIETARY = "modinfo/ubuntuforums-295.53-proprietary-license-nvidia-3.4.txt"
NO_PEERMEM = "peermem/vm-no-peermem-ls-d-stderr-gdr-cc-paths.txt"
HGX_LSPCI = "lspci_vvv/gpud-h100-pex890xx-cx7-acs-on-storage-switch-partial.txt"
NO_NVSWITCH_LSPCI = "lspci_vvv/fastfetch-issue1658-h100-nonroot-capabilities-access-denied-partial.txt"
DOCA = "ofed_info/exa-doc-doca-ofed-internal-24.10-1.1.4.0.200-s.txt"
DOCA_OTHER = "ofed_info/exa-doc-doca-ofed-internal-24.10-2.1.8-rocky8-s.txt"
MOFED_47 = "ofed_info/nvpeermem-issue63-mlnx-ofed-4.7-1.0.0.1-s.txt"
INBOX = "ofed_info/ompi-issue9957-command-not-found-inbox-rdma-core.txt"


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def h100() -> Inventory:
    return load_inventory(data_dir("inventories") / "modern-h100.yml")


def _step(inventory: Inventory, name: str):
    (step,) = select_steps(load_playbook(data_dir("playbooks") / "host-setup.yml"), [name])
    return render_step(step, inventory.nodes[0], step_context(inventory, {}))


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(script: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)


def _printing(bin_dir: Path, name: str, fixture: str) -> None:
    """A stand-in ``name`` that prints a real capture whatever its arguments."""
    _tool(bin_dir, name, f"tail -n +3 {FIXTURES / fixture}")


# --- OFED: DOCA-OFED recognised; never installed over another stack or version -----------------------


def test_ofed_info_reads_doca_and_mlnx_ofed_alike() -> None:
    doca = parse_ofed_info(fixture_text(DOCA))
    assert (doca.flavor, doca.version, doca.installed) == ("OFED-internal", "24.10-1.1.4.0.200", True)
    assert parse_ofed_info(fixture_text(MOFED_47)).flavor == "MLNX_OFED_LINUX"
    assert parse_ofed_info(fixture_text(INBOX)).installed is False


@pytest.mark.parametrize(
    ("fixture", "installed"),
    [
        (
            DOCA,
            True,
        ),  # DOCA-OFED 24.10-1.1.4.0 (its build number .200 after it) is the inventory's 24.10-1.1.4.0
        (DOCA_OTHER, False),  # another DOCA version
        (MOFED_47, False),  # another MLNX_OFED version
        (INBOX, False),  # no OFED stack: the distribution's rdma-core
    ],
)
def test_the_mofed_probe_recognises_the_installed_stack_by_version_whatever_its_flavor(
    h100: Inventory, fixture: str, installed: bool, tmp_path: Path
) -> None:
    if fixture == INBOX:
        _tool(tmp_path, "ofed_info", "echo 'sh: ofed_info: not found' >&2; exit 127")
    else:
        _printing(tmp_path, "ofed_info", fixture)
    done = _run(_step(h100, "mofed").check, tmp_path)
    assert (done.returncode == 0) is installed, done.stderr


@pytest.mark.parametrize("fixture", [DOCA_OTHER, MOFED_47])
def test_mofed_is_never_installed_over_another_stack_or_version(
    h100: Inventory, fixture: str, tmp_path: Path
) -> None:
    """The apply refuses (exit 1, naming the installed stack and the fix) before it touches anything:
    stand-ins for every command it would run record whether they were called."""
    _printing(tmp_path, "ofed_info", fixture)
    calls = tmp_path / "calls"
    for tool in ("install", "rm", "mkdir", "curl", "tar"):
        _tool(tmp_path, tool, f"echo {tool} >> {calls}")
    done = _run(_step(h100, "mofed").apply, tmp_path)
    assert done.returncode == 1
    installed = parse_ofed_info(fixture_text(fixture))
    assert f"{installed.flavor}-{installed.version}" in done.stderr
    assert "never installs one OFED stack or version over another" in done.stderr
    assert "image.versions.mofed" in done.stderr and "ofed_uninstall.sh" in done.stderr
    assert not calls.exists(), calls.read_text()


def test_mofed_installs_where_only_the_inbox_stack_is(h100: Inventory, tmp_path: Path) -> None:
    _tool(tmp_path, "ofed_info", "echo 'sh: ofed_info: not found' >&2; exit 127")
    calls = tmp_path / "calls"
    for tool in ("install", "rm", "mkdir", "curl", "tar"):
        _tool(tmp_path, tool, f"echo {tool} >> {calls}")
    done = _run(_step(h100, "mofed").apply, tmp_path)
    # It got as far as the download; the installer itself does not exist on this machine.
    assert "curl" in calls.read_text() and "never installs" not in done.stderr


# --- GPUDirect: DMA-BUF without peer memory, provision and check topology agreeing -------------------


def test_modinfo_tells_the_open_modules_and_their_kernel() -> None:
    open_ = parse_modinfo(fixture_text(OPEN))
    assert open_.open_modules is True and open_.kernel == "6.8.0-90-generic"
    assert open_.first("import_ns") == "DMA_BUF" and open_.unparsed_lines == []
    closed = parse_modinfo(fixture_text(PROPRIETARY))
    assert closed.open_modules is False and closed.kernel == "3.4.0-3-generic"
    assert parse_modinfo("modinfo: ERROR: Module nvidia not found.\n").error


def test_the_dmabuf_rule() -> None:
    assert dmabuf_path(open_modules=True, kernel="6.8.0-90-generic", nccl="2.21.5").usable is True
    assert dmabuf_path(open_modules=True, kernel="5.12.0-1-generic", nccl=None).usable is True
    assert dmabuf_path(open_modules=None, kernel=None, nccl="2.18.3").usable is None
    old_nccl = dmabuf_path(open_modules=True, kernel="6.8.0", nccl="2.12.12")
    assert old_nccl.usable is False and "NCCL 2.12.12 predates DMA-BUF" in old_nccl.words()
    closed = dmabuf_path(open_modules=False, kernel="5.4.0-150-generic", nccl="2.21.5")
    assert closed.usable is False and "proprietary" in closed.words() and "kernel 5.4.0-150" in closed.words()


@pytest.mark.parametrize(("fixture", "dmabuf"), [(OPEN, True), (PROPRIETARY, False)])
def test_provision_and_check_topology_agree_on_gpudirect_without_peer_memory(
    h100: Inventory, fixture: str, dmabuf: bool, tmp_path: Path
) -> None:
    """The same node, no peer-memory module (this machine has none): the gpudirect-rdma step's probe
    passes exactly where the node rules call GPUDirect RDMA available through DMA-BUF."""
    _tool(
        tmp_path,
        "modinfo",
        f'f=$2; sed -n "s/^$f:[[:space:]]*//p" {FIXTURES / fixture} | sed "s/[[:space:]]*$//"',
    )
    step_passes = _run(_step(h100, "gpudirect-rdma").check, tmp_path).returncode == 0
    facts: dict[str, Parsed] = {
        "peermem": parse_peermem(fixture_text(NO_PEERMEM)),
        "modinfo-nvidia": parse_modinfo(fixture_text(fixture)),
    }
    codes = {f.code: f.severity for f in peermem_rules(h100.nodes[0], h100, facts)}
    assert step_passes is dmabuf
    # gdr_level is set in this inventory: GDR impossible is an error, DMA-BUF an info.
    assert codes == ({"gdr-dmabuf": "info"} if dmabuf else {"peermem-missing": "error"})


def test_an_nccl_without_dmabuf_gets_no_dmabuf_branch(h100: Inventory) -> None:
    old = h100.model_copy(
        update={
            "image": h100.image.model_copy(
                update={"versions": h100.image.versions.model_copy(update={"nccl": "2.12.12"})}
            )
        }
    )
    assert "modinfo" not in _step(old, "gpudirect-rdma").check
    assert "modinfo -F license nvidia" in _step(h100, "gpudirect-rdma").check


def test_without_modinfo_the_rule_stays_a_warning_to_confirm(h100: Inventory) -> None:
    facts: dict[str, Parsed] = {"peermem": parse_peermem(fixture_text(NO_PEERMEM))}
    [finding] = peermem_rules(h100.nodes[0], h100, facts)
    assert finding.code == "peermem-missing" and finding.severity == "warning"
    assert "DMA-BUF instead" in (finding.advice or "")
    # modinfo itself missing on a GPU node leaves only this path unjudged: a warning, not an error.
    section = SectionMeta(argv=["modinfo", "nvidia"], status="missing", exit_status=127)
    [missing] = section_findings(h100.nodes[0], COLLECTOR_BY_KEY["modinfo-nvidia"], section)
    assert missing.code == "tool-missing" and missing.severity == "warning"


# --- NVSwitch from the PCI bus, the fabric manager's state ------------------------------------------


def test_nvswitches_are_found_on_the_pci_bus() -> None:
    hgx = parse_lspci(fixture_text(HGX_LSPCI))
    assert nvswitches_on_bus(hgx) == ["0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "0000:86:00.0"]
    assert nvswitches_on_bus(parse_lspci(fixture_text(NO_NVSWITCH_LSPCI))) == []


def _hgx_lspci(bin_dir: Path) -> None:
    """`lspci -d 10de::0680` on the HGX of the capture: its NVSwitch header lines."""
    _tool(
        bin_dir,
        "lspci",
        f"grep -E '^[0-9a-f]{{2}}:[0-9a-f]{{2}}\\.[0-7] Bridge: NVIDIA' {FIXTURES / HGX_LSPCI}",
    )


def test_an_nvswitch_system_whose_nvidia_smi_shows_no_fabric_state_still_gets_the_fabric_manager(
    h100: Inventory, tmp_path: Path
) -> None:
    """NVSwitches on the bus, nvidia-smi -q with Fabric N/A (a driver that reports no fabric): the probe
    no longer skips the step (this machine has no fabric manager, so it fails: the step runs)."""
    _hgx_lspci(tmp_path)
    smi = FIXTURES / "nvidia_smi_q" / "gpud-a10-535.129.03-remapped-rows-pending.txt"
    _tool(tmp_path, "nvidia-smi", f'case "$1" in -q) tail -n +3 {smi} ;; *) echo 535.129.03 ;; esac')
    assert _run(_step(h100, "fabric-manager").check, tmp_path).returncode != 0
    # The same output without NVSwitches on the bus: nothing to do.
    _tool(tmp_path, "lspci", "true")
    assert _run(_step(h100, "fabric-manager").check, tmp_path).returncode == 0


def test_check_topology_names_nvswitches_without_a_fabric_state(h100: Inventory) -> None:
    hgx = parse_lspci(fixture_text(HGX_LSPCI))
    na = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gpud-8xrtx4090-535.154.05-fabric-na-idle-gen1.txt"))
    [finding] = fabric_manager_rules(h100.nodes[0], {"lspci-vvv": hgx, "nvidia-smi-q": na})
    assert finding.code == "nvswitch-fabric-unknown" and "4 NVSwitch(es)" in finding.message
    assert finding.severity == "info"  # A100 boards print N/A with the fabric manager running
    completed = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gpud-8xh100-535.161.08-fabric-completed.txt"))
    assert fabric_manager_rules(h100.nodes[0], {"lspci-vvv": hgx, "nvidia-smi-q": completed}) == []
    none = parse_lspci(fixture_text(NO_NVSWITCH_LSPCI))
    assert fabric_manager_rules(h100.nodes[0], {"lspci-vvv": none, "nvidia-smi-q": na}) == []


def test_the_fabric_is_healthy_only_at_completed_with_success() -> None:
    expect = Expectation(node="n1")
    completed = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gpud-8xh100-535.161.08-fabric-completed.txt"))
    assert not [f for f in smi_q_rules(completed, expect) if f.code == "nvswitch-fabric-not-ready"]
    stuck = parse_nvidia_smi_q(fixture_text("nvidia_smi_q/gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt"))
    assert [f.code for f in smi_q_rules(stuck, expect)] == ["nvswitch-fabric-not-ready"]
    # Completed but without Success (the status N/A): not healthy either.
    half = completed.model_copy(
        update={
            "gpus": [
                SmiQGpu(
                    bus_id="00000000:19:00.0",
                    attributes={"Fabric/State": "Completed", "Fabric/Status": "N/A"},
                )
            ]
        }
    )
    assert [f.code for f in smi_q_rules(half, expect)] == ["nvswitch-fabric-not-ready"]


@pytest.mark.parametrize(
    ("fixture", "ok"),
    [
        ("gpud-8xh100-535.161.08-fabric-completed.txt", True),
        ("gptq-doc-h100-sxm-vm-fabric-in-progress-grep.txt", False),
    ],
)
def test_the_fabric_manager_probe_reads_state_and_status(
    h100: Inventory, fixture: str, ok: bool, tmp_path: Path
) -> None:
    """With the fabric manager installed and running (stand-ins say so), the probe passes only where
    every GPU's fabric is Completed/Success."""
    smi = FIXTURES / "nvidia_smi_q" / fixture
    _tool(tmp_path, "nvidia-smi", f'case "$1" in -q) tail -n +3 {smi} ;; *) echo 535.161.08 ;; esac')
    _tool(tmp_path, "dpkg-query", "echo 535.161.08-1")
    _tool(tmp_path, "systemctl", "exit 0")
    done = _run(_step(h100, "fabric-manager").check, tmp_path)
    assert (done.returncode == 0) is ok, done.stderr
