"""Per-node rules over a collected bundle: tools missing or failing, the existing IB and GPU-NIC
topology rules fed with the inventory's expectation, the fabric address, and the peer-memory module.
Pure: a ``NodeBundle`` and the inventory in, a ``NodeReport`` out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.diagnostics.bundle import NodeBundle, NodeMeta, SectionMeta
from clusterctl.diagnostics.collectors import COLLECTOR_BY_KEY, Collector
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.nccl_gdr import dmabuf_path
from clusterctl.diagnostics.nvswitch import nvswitches_on_bus
from clusterctl.diagnostics.parsers.ip_addr import IpAddr
from clusterctl.diagnostics.parsers.lspci import Lspci
from clusterctl.diagnostics.parsers.modinfo import Modinfo
from clusterctl.diagnostics.parsers.nvidia_smi_csv import NvidiaSmiCsv
from clusterctl.diagnostics.parsers.nvidia_smi_q import NvidiaSmiQ
from clusterctl.diagnostics.parsers.peermem import PeerMem
from clusterctl.diagnostics.parsers.proc_modules import ProcModules
from clusterctl.diagnostics.rules import apply_rules, expectation_for
from clusterctl.findings import Finding, Severity
from clusterctl.inventory import Inventory, Node

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# A GPU or RDMA tool missing on a node that has GPUs or RDMA is an error, except ofed_info (inbox
# rdma-core still does verbs); a general tool (ip, cat, ls) missing leaves one check blind: a warning.
# DCGM is optional (`check health --level` runs it where a site installed it); without nvbandwidth the
# copy bandwidth is unknown (the node's verdict says so), not failed.
_MISSING_SEVERITY: dict[str, Severity] = {
    "gpu": "error",
    "rdma": "error",
    "ofed-info": "warning",
    "modinfo-nvidia": "warning",  # kmod's modinfo: only the DMA-BUF path goes unjudged without it
    "dcgmi-diag": "info",
    "h2d-bandwidth": "warning",
}
# Outputs the existing rules judge, and what the node must have for them to apply.
_RULED = {
    "nvidia-smi-topo": "gpu",
    "ibstat": "rdma",
    "ibv-devinfo": "rdma",
    "ofed-info": "rdma",
    "lspci-vvv": "any",
    "nvidia-smi-q": "gpu",
    "proc-cmdline": "gpu",
}


@dataclass
class NodeReport:
    """One node's judgement: its collection meta, the parsed outputs by key, and the findings."""

    node: str
    meta: NodeMeta | None
    facts: dict[str, Parsed] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def needs(node: Node, need: str) -> bool:
    """Whether ``node`` has what a collector's output is about ("gpu", "rdma" or "any")."""
    return need == "any" or (need == "gpu" and node.gpus.count > 0) or (need == "rdma" and node.rdma)


def section_findings(node: Node, collector: Collector, section: SectionMeta) -> list[Finding]:
    """A command not installed, failed or timed out: severity by whether this node needs its output."""
    if section.status == "ok":
        return []
    needed = needs(node, collector.needs)
    command = " ".join(section.argv)
    detail = section.stderr_tail.strip().splitlines()[-1:] or [f"exit status {section.exit_status}"]
    if section.status == "missing":
        severity = _MISSING_SEVERITY.get(collector.key) or _MISSING_SEVERITY.get(collector.needs, "warning")
        severity = severity if needed else "info"
        why = {"gpu": "it has GPUs", "rdma": f"its fabric is {node.fabric.kind}"}.get(collector.needs, "")
        return [
            Finding(
                severity=severity,
                code="tool-missing",
                message=f"{section.argv[0]} is not installed, so `{command}` gave no data",
                advice=f"Install it: the inventory says {why}, and this check cannot see that part without it."
                if needed and why
                else ("Install it to check this." if needed else "Not needed on this node by its inventory."),
                node=node.name,
            )
        ]
    return [
        Finding(
            severity="warning" if needed else "info",
            code="collector-failed",
            message=f"`{command}` {section.status}: {detail[0][:300]}",
            advice="Run the command on the node by hand to see why; its output is unknown, not empty.",
            node=node.name,
        )
    ]


def address_rules(node: Node, ip: IpAddr) -> list[Finding]:
    """The inventory's fabric interface is missing, lacks the inventory's address, or is down."""
    if node.fabric.address is None or ip.error:
        return []
    wanted, name = str(node.fabric.address), node.fabric.interface
    interface = ip.interface(name)
    advice = (
        f"Configure {wanted} on {name} (netplan, ifcfg or `ip addr add`) or fix fabric.address/interface in "
        "the inventory; MPI and NCCL are pointed at this address."
    )
    if interface is None or wanted not in interface.addresses:
        has = (
            "does not exist" if interface is None else f"has {', '.join(interface.addresses) or 'no address'}"
        )
        return [
            Finding(
                severity="error",
                code="ipoib-address-mismatch",
                message=f"{name} {has}; the inventory gives it {wanted}",
                advice=advice,
                node=node.name,
            )
        ]
    if interface.state not in ("UP", "UNKNOWN"):
        return [
            Finding(
                severity="error",
                code="fabric-interface-down",
                message=f"{name} is {interface.state}",
                advice=f"Bring it up (`ip link set {name} up`) and check the link.",
                node=node.name,
            )
        ]
    return []


def peermem_rules(node: Node, inventory: Inventory, facts: dict[str, Parsed]) -> list[Finding]:
    """On a GPU node with an RDMA fabric: NCCL would find no GPUDirect RDMA peer-memory client.

    The probe lists the three files NCCL's gdr.cc tests (memory_peers/nv_mem, nv_mem_nc,
    /sys/module/nvidia_peermem/version); /proc/modules (or lsmod) says whether the module is loaded when
    the probe did not look at /sys/module (a pasted `cat` of the memory_peers files), and stands in
    alone when the probe gave no answer. Loaded without a memory_peers client is its own finding.
    Without a module, GPUDirect RDMA can still go through DMA-BUF (``nccl_gdr.dmabuf_path``: NCCL 2.13+,
    the open kernel modules, Linux 5.12+; `modinfo nvidia` gives the last two): an info where it can, the
    same rule provision's gpudirect-rdma step passes on. Where it cannot, the finding is an error when
    the inventory asks for GDR, else a warning; where a fact is unknown, a warning to confirm with a
    run's NCCL log.
    """
    if not (node.gpus.count and node.rdma):
        return []
    probe, modules = facts.get("peermem"), facts.get("modules")
    listed = isinstance(modules, ProcModules) and not modules.error
    module_loaded = (
        isinstance(modules, ProcModules)
        and not modules.error
        and any(m in PEERMEM_MODULES for m in modules.modules)
    )
    if isinstance(probe, PeerMem):
        loaded = probe.loaded or module_loaded
        if loaded and not probe.registered:
            return [_peermem_unregistered(node)]
    elif listed:
        loaded = module_loaded
    else:
        return []  # neither source answered; the section findings already say so
    if loaded:
        return []
    found = facts.get("modinfo-nvidia")
    modinfo = found if isinstance(found, Modinfo) and found.error is None else Modinfo()
    nccl = inventory.image.versions.nccl
    path = dmabuf_path(open_modules=modinfo.open_modules, kernel=modinfo.kernel, nccl=nccl)
    if path.usable:
        return [
            Finding(
                severity="info",
                code="gdr-dmabuf",
                message=f"no peer-memory module: GPUDirect RDMA goes through DMA-BUF (open kernel modules, "
                f"kernel {modinfo.kernel}, NCCL {nccl or 'of the image'})",
                advice="Nothing to do; a run's NCCL log says 'DMA-BUF is available' and shows '/GDRDMA' channels.",
                node=node.name,
            )
        ]
    wants_gdr = bool(inventory.run.gdr_level)
    dmabuf = (
        f"DMA-BUF is no way around it here: {path.words()}."
        if path.usable is False
        else "NCCL 2.13+ can use DMA-BUF instead (Linux 5.12+, open GPU kernel modules): a run's NCCL log "
        "saying 'DMA-BUF is available' or showing '/GDRDMA' channels settles it."
    )
    return [
        Finding(
            severity="error" if wants_gdr and path.usable is False else "warning",
            code="peermem-missing",
            message="NCCL finds no GPUDirect RDMA peer-memory module (none of "
            "/sys/kernel/mm/memory_peers/nv_mem{,_nc}/version, /sys/module/nvidia_peermem/version)"
            + (
                f" although the inventory sets NCCL_NET_GDR_LEVEL={inventory.run.gdr_level}"
                if wants_gdr
                else ""
            ),
            advice=f"`modprobe nvidia-peermem` (NVIDIA driver R470+) or nv_peer_mem; both need the PeerDirect "
            f"support of MLNX_OFED/DOCA-OFED's ib_core, not the distribution's inbox RDMA stack. {dmabuf} "
            "Without GPUDirect RDMA NCCL copies every GPU buffer through host memory before it goes on the "
            "wire.",
            node=node.name,
        )
    ]


def _peermem_unregistered(node: Node) -> Finding:
    """nvidia_peermem is loaded, but no client is registered under /sys/kernel/mm/memory_peers."""
    return Finding(
        severity="warning",
        code="peermem-not-registered",
        message="nvidia_peermem is loaded but registered no peer-memory client (no "
        "/sys/kernel/mm/memory_peers/nv_mem{,_nc}/version): NCCL counts the module as present, yet GPU "
        "memory cannot be registered with the HCA",
        advice="The driver's modules were built without MOFED's peer-memory API (driver installed before "
        "MLNX OFED): rebuild them by DKMS against MOFED's ib_core and reload nvidia_peermem "
        "(`clusterctl provision --step gpudirect-rdma` does both).",
        node=node.name,
    )


def fabric_manager_rules(node: Node, facts: dict[str, Parsed]) -> list[Finding]:
    """NVSwitches on the PCI bus while `nvidia-smi -q` gives no GPU a fabric state: an info naming them,
    so a driver that prints no Fabric block cannot hide an NVSwitch system (A100 boards and older drivers
    print N/A even with the fabric manager running, so it is no warning; the states themselves, where
    printed, are judged by ``smi_q_rules``, and the service by provision's fabric-manager step)."""
    lspci, smi = facts.get("lspci-vvv"), facts.get("nvidia-smi-q")
    if not node.gpus.count or not isinstance(lspci, Lspci) or not isinstance(smi, NvidiaSmiQ) or smi.error:
        return []
    switches = nvswitches_on_bus(lspci)
    if not switches or any(gpu.fabric_state is not None for gpu in smi.gpus):
        return []
    return [
        Finding(
            severity="info",
            code="nvswitch-fabric-unknown",
            message=f"{len(switches)} NVSwitch(es) on the PCI bus ({', '.join(switches[:4])}"
            f"{', ...' if len(switches) > 4 else ''}) and nvidia-smi -q gives no GPU a fabric state: the "
            "GPUs need nvidia-fabricmanager at the driver's version, running, or CUDA fails at its first "
            "call (cudaErrorSystemNotReady, 802)",
            advice="`clusterctl provision --step fabric-manager` checks the service and installs and starts it "
            "where it is missing; `systemctl status nvidia-fabricmanager` shows it by hand.",
            node=node.name,
        )
    ]


def gpu_count_rules(node: Node, csv: NvidiaSmiCsv) -> list[Finding]:
    """nvidia-smi lists fewer or more GPUs than the inventory says."""
    if csv.error or not node.gpus.count or len(csv.rows) == node.gpus.count:
        return []
    return [
        Finding(
            severity="error",
            code="gpu-count-mismatch",
            message=f"nvidia-smi lists {len(csv.rows)} GPUs; the inventory says {node.gpus.count}",
            advice="Check `nvidia-smi -L` and dmesg for GPUs that fell off the bus, or fix gpus.count.",
            node=node.name,
        )
    ]


def judge_node(inventory: Inventory, node: Node, bundle: NodeBundle | None) -> NodeReport:
    """Every per-node finding for ``node`` from its part of a bundle (None: not in the bundle)."""
    if bundle is None:  # a saved bundle of fewer nodes, e.g. a run's snapshot of the run's nodes
        finding = Finding(
            severity="warning",
            code="node-not-in-bundle",
            message="the bundle holds nothing from this node, so it was not judged",
            advice="Collect a bundle of every node (`clusterctl collect -o DIR`) to judge it too.",
            node=node.name,
        )
        return NodeReport(node=node.name, meta=None, findings=[finding])
    if bundle.meta.unreachable or not bundle.meta.sections:
        finding = Finding(
            severity="error",
            code="node-unreachable" if bundle.meta.unreachable else "collection-failed",
            message=f"nothing collected: {bundle.meta.error or 'no output'}",
            advice=f"Check that {node.name} answers SSH at {node.address}:{node.ssh.port} as {node.ssh.user} "
            f"(`clusterctl provision --dry-run --limit {node.name}` tries it), then collect again.",
            node=node.name,
        )
        return NodeReport(node=node.name, meta=bundle.meta, findings=[finding])
    report = NodeReport(node=node.name, meta=bundle.meta)
    expect = expectation_for(inventory, node)
    for key, section in bundle.meta.sections.items():
        collector = COLLECTOR_BY_KEY.get(key)
        if collector is None:
            continue
        report.findings += section_findings(node, collector, section)
        text = bundle.outputs.get(key, "")
        if section.status == "ok" or text.strip():
            report.facts[key] = collector.parse(text)
            if key in _RULED and needs(node, _RULED[key]):
                report.findings += apply_rules(key, report.facts[key], expect)
    if isinstance(ip := report.facts.get("ip-addr"), IpAddr):
        report.findings += address_rules(node, ip)
    if isinstance(csv := report.facts.get("nvidia-smi-csv"), NvidiaSmiCsv):
        report.findings += gpu_count_rules(node, csv)
    report.findings += peermem_rules(node, inventory, report.facts)
    report.findings += fabric_manager_rules(node, report.facts)
    return report
