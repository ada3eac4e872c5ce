"""Host rules NCCL's troubleshooting guide asks for: PCIe ACS above GPUs and HCAs, PCIe links below
their capability (and whether lspci could see them), the IOMMU mode, NVSwitch fabric registration, the
IB MTU and how many of a node's HCAs the inventory lets NCCL use. Pure: parsed outputs and an
``Expectation`` in, findings out.

``HOST_RULES`` maps an output kind to the rules here that judge it; ``rules.apply_rules`` runs them
after the kind's main rule, so `inspect` and `check topology` judge alike.
"""

from __future__ import annotations

from collections.abc import Callable

from clusterctl.diagnostics.expectation import Expectation
from clusterctl.diagnostics.model import to_float
from clusterctl.diagnostics.parsers.ibstat import IbStat
from clusterctl.diagnostics.parsers.ibv_devinfo import IbvDevinfo
from clusterctl.diagnostics.parsers.lspci import ACS_ENABLED, ACS_REDIRECT, Lspci, PciDevice, PciLink
from clusterctl.diagnostics.parsers.nvidia_smi_q import NvidiaSmiQ
from clusterctl.diagnostics.parsers.proc_cmdline import ProcCmdline
from clusterctl.findings import Finding

_ACS_ADVICE = (
    "Disable ACS on the PCIe switches (BIOS: 'ACS' / 'PCIe ACS control', or per bridge "
    "`setpci -s <bdf> ECAP_ACS+0x6.w=0000` after every boot). NCCL's troubleshooting guide: with ACS "
    "enabled, GPU peer-to-peer and GPUDirect RDMA traffic is sent up to the root complex, which causes "
    "a significant performance reduction or even a hang. Keep ACS only where a VM needs the IOMMU "
    "isolation it gives."
)
# ibv_devinfo prints active_mtu as "4096 (5)"; 4096 is the largest IB MTU and what RoCE reaches with an
# interface MTU of at least 4200.
_FULL_MTU = 4096


def _link(link: PciLink) -> str:
    speed = f"{link.speed_gts:g} GT/s" if link.speed_gts else "unknown speed"
    return f"{speed} x{link.width}" if link.width else speed


def _where(device: PciDevice) -> str:
    return f"{'GPU' if device.is_gpu else 'HCA'} {device.bdf} ({device.description})"


# Bridges a finding names; a real device has a handful above it, a hostile output thousands.
MAX_BRIDGES_NAMED = 8


def _redirecting(bridges: list[PciDevice]) -> str | None:
    """The switch ports among ``bridges`` that redirect peer-to-peer traffic, as a message part; None: none.

    A root port's redirect changes nothing: traffic between two root ports goes through the root complex
    anyway. A switch port's redirect is what pulls GPU<->HCA traffic up out of the switch.
    """
    redirecting = [b for b in bridges if b.acs_redirect and b.port_type != "Root Port"]
    if not redirecting:
        return None
    named = ", ".join(f"{b.bdf} ({'/'.join(b.acs_redirect)})" for b in redirecting[:MAX_BRIDGES_NAMED])
    more = len(redirecting) - MAX_BRIDGES_NAMED
    return named + (f" and {more} more" if more > 0 else "")


def acs_rules(lspci: Lspci, expect: Expectation) -> list[Finding]:
    """PCIe switch ports above a GPU or an HCA that redirect peer-to-peer traffic (ACSCtl ReqRedir+/CmpltRedir+).

    Where the output cannot place them (``lspci -vvv | grep ACSCtl``, an excerpt that starts inside a
    device block or has parts left out), every ACSCtl with SrcValid+, ReqRedir+ or CmpltRedir+ is reported
    as one warning that ACS may be enabled, as NCCL's troubleshooting guide reads SrcValid+. A whole
    output whose switches serve no GPU or HCA (a sandbox node, a storage switch) says nothing.
    """
    findings: list[Finding] = []
    # Devices on one bus share their bridges: each bus is judged once (linear in the devices).
    judged: dict[tuple[str, int], str | None] = {}
    for device in (d for d in lspci.devices if d.is_gpu or d.is_hca):
        key = (device.domain, device.bus)
        if key not in judged:
            judged[key] = _redirecting(lspci.bridges_above(device))
        bridges = judged[key]
        if bridges:
            findings.append(
                Finding(
                    severity="error",
                    code="pcie-acs-enabled",
                    message=f"ACS redirects peer-to-peer traffic on the bridges above {_where(device)}: {bridges}",
                    advice=_ACS_ADVICE,
                    node=expect.node,
                )
            )
    if not findings and (unplaced := _unplaced_acs(lspci)):
        findings.append(
            Finding(
                severity="warning",
                code="pcie-acs-enabled",
                message=f"ACS may be enabled: {unplaced}",
                advice="Collect the whole `lspci -vvv` as root to see which GPUs and HCAs sit below them. "
                + _ACS_ADVICE,
                node=expect.node,
            )
        )
    return findings


def _unplaced_acs(lspci: Lspci) -> str | None:
    """The ACSCtl lines with ACS on that the output cannot place above a GPU or an HCA, as a message; None
    when there are none or the device tree is whole (then the placed rule above has judged them)."""
    why = (
        "the output has no device headers" if lspci.orphan_acs and not lspci.devices
        else f"{lspci.elided} part(s) of the output were left out" if lspci.elided
        else "the output starts inside a device block" if lspci.orphan_acs
        else None
    )  # fmt: skip
    if why is None:
        return None
    lines = [[name for name in ACS_ENABLED if flags.get(name)] for flags in lspci.orphan_acs]
    devices = [d for d in lspci.devices if d.acs_enabled and d.port_type != "Root Port"]
    lines += [d.acs_enabled for d in devices]
    on = [flags for flags in lines if flags]
    if not on:
        return None
    redirect = sum(1 for flags in on if any(name in flags for name in ACS_REDIRECT))
    named = ", ".join(f"{d.bdf} ({'/'.join(d.acs_enabled)})" for d in devices[:MAX_BRIDGES_NAMED])
    return (
        f"{len(on)} ACSCtl line(s) show ACS controls on (SrcValid+, ReqRedir+ or CmpltRedir+), {redirect} of them "
        f"redirecting peer-to-peer traffic (ReqRedir+/CmpltRedir+){'; ' + named if named else ''}; {why}, so "
        "which GPUs or HCAs sit below them is unknown"
    )


def lspci_access_rules(lspci: Lspci, expect: Expectation) -> list[Finding]:
    """lspci ran without root, so the GPUs' and HCAs' ACS and link state could not be judged."""
    hidden = [d.bdf for d in lspci.devices if (d.is_gpu or d.is_hca) and d.capabilities_hidden]
    if not hidden:
        return []
    return [
        Finding(
            severity="warning",
            code="lspci-capabilities-hidden",
            message=f"lspci could not read the PCIe capabilities of {len(hidden)} GPU(s)/HCA(s) ({', '.join(hidden)}): "
            "ACS and link state are unknown, not fine",
            advice="Collect as root (ssh.user root, or sudo for lspci): lspci shows 'Capabilities: <access denied>' "
            "to other users.",
            node=expect.node,
        )
    ]


def pcie_link_rules(lspci: Lspci, expect: Expectation) -> list[Finding]:
    """GPUs and HCAs whose PCIe link trained below its capability (LnkSta vs LnkCap).

    Fewer lanes is an error: the device moves data at a fraction of its rate whatever it does. A lower
    speed is an error on an HCA, and only a note on a GPU, which lowers its link speed when idle.
    """
    findings: list[Finding] = []
    for device in (d for d in lspci.devices if (d.is_gpu or d.is_hca) and d.link_sta):
        cap, sta = device.link_cap or PciLink(), device.link_sta
        assert sta is not None  # only devices with a LnkSta are iterated
        narrower = device.width_downgraded or bool(cap.width and sta.width and sta.width < cap.width)
        slower = device.speed_downgraded or bool(
            cap.speed_gts and sta.speed_gts and sta.speed_gts < cap.speed_gts
        )
        if not (narrower or slower):
            continue
        idle_gpu = device.is_gpu and not narrower
        capable = (
            f"it is capable of {_link(cap)}"
            if device.link_cap
            else "lspci marks it (downgraded); its LnkCap line is missing"
        )
        findings.append(
            Finding(
                severity="info" if idle_gpu else "error",
                code="pcie-link-downgraded",
                message=f"{_where(device)} runs its PCIe link at {_link(sta)}; {capable}",
                advice="An idle GPU lowers its link speed to save power: check `nvidia-smi -q` (PCIe Generation "
                "Current) while a job runs."
                if idle_gpu
                else "Reseat the card or move it to a full-width slot, check the riser and the BIOS lane "
                "bifurcation; every transfer through this link is capped at the lower rate.",
                node=expect.node,
            )
        )
    if lspci.orphan_downgraded and not lspci.devices:
        links = "; ".join(lspci.orphan_downgraded)
        findings.append(
            Finding(
                severity="warning",
                code="pcie-link-downgraded",
                message=f"lspci marks {len(lspci.orphan_downgraded)} PCIe link(s) downgraded ({links}); the "
                "excerpt has no device headers, so which device (and whether it is a GPU idling) is unknown",
                advice="Collect the whole `lspci -vvv` (as root) to see which device it is. A link narrower than "
                "its slot is a seating, riser or bifurcation fault; a GPU's lower speed at idle is normal.",
                node=expect.node,
            )
        )
    return findings


def smi_q_rules(report: NvidiaSmiQ, expect: Expectation) -> list[Finding]:
    """NVSwitch GPUs whose fabric registration is not done, and GPU links narrower than they can be."""
    findings: list[Finding] = []
    for gpu in report.gpus:
        name = f"GPU {gpu.bus_id}" if gpu.bus_id else "a GPU"
        state, status = gpu.fabric_state, gpu.fabric_status
        # Healthy only at State Completed with Status Success (NVIDIA's fabric manager guide).
        if state is not None and (state != "Completed" or status != "Success"):
            findings.append(
                Finding(
                    severity="error",
                    code="nvswitch-fabric-not-ready",
                    message=f"{name}: NVSwitch fabric registration is '{state}' (status {status or 'N/A'}); CUDA "
                    "refuses to start on it (cudaErrorSystemNotReady, 802) until it is Completed",
                    advice="Start the fabric manager (`systemctl enable --now nvidia-fabricmanager`, same version "
                    "as the driver; NVLink5 systems also need NVLSM) and check its log. In a VM the NVSwitches "
                    "must be passed through too.",
                    node=expect.node,
                )
            )
        if gpu.pcie_width_current and gpu.pcie_width_max and gpu.pcie_width_current < gpu.pcie_width_max:
            findings.append(
                Finding(
                    severity="error",
                    code="pcie-link-downgraded",
                    message=f"{name}: PCIe link x{gpu.pcie_width_current}; the GPU can use x{gpu.pcie_width_max}",
                    advice="Reseat the GPU or check its riser and slot; width does not drop to save power.",
                    node=expect.node,
                )
            )
    return findings


def iommu_rules(cmdline: ProcCmdline, expect: Expectation) -> list[Finding]:
    """An IOMMU that translates DMA (intel_iommu=on/amd_iommu=on without iommu=pt)."""
    if cmdline.error or cmdline.iommu_mode != "translated":
        return []
    return [
        Finding(
            severity="warning",
            code="iommu-translating",
            message="the kernel command line turns the IOMMU on without iommu=pt, so every GPU and HCA DMA "
            "(peer-to-peer, GPUDirect RDMA) is translated by the IOMMU",
            advice="Add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) unless this host gives devices "
            "to VMs: translated DMA slows or hangs GPU peer-to-peer and RDMA transfers (NVIDIA/nccl#257 was "
            "fixed by intel_iommu=off; RCCL warns when iommu=pt is missing).",
            node=expect.node,
        )
    ]


def mtu_rules(info: IbvDevinfo, expect: Expectation) -> list[Finding]:
    """Active ports of the HCAs NCCL may use whose active MTU is below 4096."""
    findings: list[Finding] = []
    for device in (d for d in info.devices if not expect.hca or d.name in expect.hca):
        for port in device.ports:
            # "4096 (5)" as printed; any number (4096.0 too) is read, anything else is unknown.
            mtu = (
                to_float(port.active_mtu.split()[0]) if port.active_mtu and port.active_mtu.split() else None
            )
            if port.state != "PORT_ACTIVE" or mtu is None or not mtu < _FULL_MTU:
                continue
            roce = port.link_layer == "Ethernet"
            findings.append(
                Finding(
                    severity="warning",
                    code="ib-mtu-below-4096",
                    message=f"{device.name} port {port.port} ({port.link_layer or 'link layer unknown'}) has active_mtu "
                    f"{mtu:g}; NCCL's IB transport sends in packets of the port's active MTU",
                    advice="Set the interface MTU to at least 4200 (RoCE active_mtu follows it) on every node and "
                    "the switches."
                    if roce
                    else "Raise the partition MTU in the subnet manager (partitions.conf mtu=5 for 4096) and check "
                    "the switch ports.",
                    node=expect.node,
                )
            )
    return findings


def hca_count_rules(report: IbStat, expect: Expectation) -> list[Finding]:
    """The inventory lets NCCL use fewer HCAs than the host has up at the same link layer and rate."""
    allowed = expect.hca
    if not allowed:
        return []
    active = {
        ca.name: max(port.rate or 0 for port in ca.ports)
        for ca in report.cas
        if any(
            p.state == "Active" and (expect.link_layer is None or p.link_layer in (None, expect.link_layer))
            for p in ca.ports
        )
    }
    floor = min((active[name] for name in allowed if name in active), default=None)
    if floor is None:
        return []
    idle = sorted(name for name, rate in active.items() if name not in allowed and rate >= floor)
    if not idle:
        return []
    return [
        Finding(
            severity="warning",
            code="hca-count-below-host",
            message=f"the inventory lets NCCL use {len(allowed)} HCA(s) ({', '.join(allowed)}) but the host has "
            f"{len(idle)} more up at {floor:g} Gb/s or faster: {', '.join(idle)}",
            advice="List every compute HCA in fabric.hca (NCCL_IB_HCA): rails left out carry nothing, so the node "
            "runs at a fraction of its network bandwidth.",
            node=expect.node,
        )
    ]


HOST_RULES: dict[str, list[Callable[..., list[Finding]]]] = {
    "lspci-vvv": [lspci_access_rules, acs_rules, pcie_link_rules],
    "nvidia-smi-q": [smi_q_rules],
    "proc-cmdline": [iommu_rules],
    "ibv-devinfo": [mtu_rules],
    "ibstat": [hca_count_rules],
}
