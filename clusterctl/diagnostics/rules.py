"""Rules: facts from parsed outputs in, findings a user can act on out. Pure; no I/O.

``Expectation`` (``expectation.py``, re-exported here) carries what the inventory says a node should
have, so the same rules serve `inspect` (expectations from options, or none) and `check topology` (from
each node).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from clusterctl.diagnostics.expectation import Expectation as Expectation
from clusterctl.diagnostics.expectation import expectation_for as expectation_for
from clusterctl.diagnostics.model import Parsed
from clusterctl.diagnostics.nccl_gdr import GdrPolicy, nccl_path
from clusterctl.diagnostics.parsers.horovod_synthetic import HorovodSynthetic
from clusterctl.diagnostics.parsers.ibstat import IbStat
from clusterctl.diagnostics.parsers.ibv_devinfo import IbvDevinfo
from clusterctl.diagnostics.parsers.mpi_error import MpiError
from clusterctl.diagnostics.parsers.nccl_log import GDR_DISABLED_ADVICE, NcclLog, gdr_disabled_in_words
from clusterctl.diagnostics.parsers.nccl_tests import NcclTestsOutput
from clusterctl.diagnostics.parsers.nvidia_smi_topo import NvidiaSmiTopo, path_rank
from clusterctl.diagnostics.parsers.ofed_info import OfedInfo
from clusterctl.diagnostics.parsers.tf_cnn_benchmarks import TfCnnBenchmarksOutput
from clusterctl.diagnostics.rules_host import HOST_RULES
from clusterctl.findings import Finding


def ib_rules(report: IbStat, expect: Expectation) -> list[Finding]:
    """Ports down, slower than expected, or on the wrong link layer (ibstat and ibstatus)."""
    findings: list[Finding] = []
    if report.error:
        findings.append(_missing("ibstat", report.error, expect))
    names = [ca.name for ca in report.cas]
    absent = [h for h in expect.hca or [] if h not in names]
    if absent and names:
        findings.append(
            Finding(
                severity="error",
                code="hca-not-found",
                message=f"the inventory's HCA {', '.join(absent)} is not on this host (found: {', '.join(names)})",
                advice="Set fabric.hca in the inventory to one of the HCAs found (`ibv_devices` lists them), "
                "or check that the HCA's driver is loaded; NCCL_IB_HCA and the checks use this name.",
                node=expect.node,
            )
        )
    for ca in report.cas:
        used = expect.hca is None or ca.name in expect.hca
        for port in ca.ports:
            where = f"{ca.name} port {port.port}"
            if port.state != "Active" or (port.physical_state and port.physical_state != "LinkUp"):
                findings.append(_port_down(where, f"{port.state}/{port.physical_state}", used, expect))
                continue
            if used and expect.rate_gbps and port.rate is not None and port.rate < expect.rate_gbps:
                findings.append(
                    Finding(
                        severity="error",
                        code="ib-rate-below-expected",
                        message=f"{where} runs at {port.rate:g} Gb/s; {expect.rate_gbps:g} Gb/s expected",
                        advice="Check the cable, the switch port and `ibportstate`; a link that trained at a "
                        "lower width or speed caps every allreduce at that rate.",
                        node=expect.node,
                    )
                )
            if used and expect.link_layer and port.link_layer and port.link_layer != expect.link_layer:
                findings.append(_link_layer(where, port.link_layer, expect))
    return findings


def devinfo_rules(info: IbvDevinfo, expect: Expectation) -> list[Finding]:
    """The same port checks from `ibv_devinfo` (states PORT_ACTIVE, PORT_DOWN, ...)."""
    findings: list[Finding] = []
    if info.error:
        findings.append(_missing("ibv_devinfo", info.error, expect))
    for device in info.devices:
        used = expect.hca is None or device.name in expect.hca
        for port in device.ports:
            where = f"{device.name} port {port.port}"
            if port.state and port.state != "PORT_ACTIVE":
                findings.append(_port_down(where, port.state, used, expect))
            elif used and expect.link_layer and port.link_layer and port.link_layer != expect.link_layer:
                findings.append(_link_layer(where, port.link_layer, expect))
    return findings


def topology_rules(topo: NvidiaSmiTopo, expect: Expectation) -> list[Finding]:
    """For each GPU: whether NCCL uses GPUDirect RDMA to the HCAs it may use, as the image's NCCL decides.

    The HCAs NCCL may use are the expectation's (NCCL_IB_HCA), else every NIC of the matrix. Each GPU
    is judged against the nearest of them (the one its traffic goes through) and the others are
    named when GDR stops short of them, so a node restricted to one HCA is not called GDR-capable for
    GPUs that only reach that HCA across the CPU.
    """
    if topo.error:
        return [_missing("nvidia-smi topo -m", topo.error, expect)]
    policy = GdrPolicy(expect.nccl_version, expect.gdr_level)
    nics = [nic for nic in topo.nics if not expect.hca or nic in expect.hca]
    gdr = [finding for gpu in topo.gpus if (finding := _gpu_gdr(gpu, topo, nics, policy, expect)) is not None]
    return [*gdr, *_hca_across_numa(topo, nics, expect)]


def _hca_across_numa(topo: NvidiaSmiTopo, nics: list[str], expect: Expectation) -> list[Finding]:
    """One warning naming the GPUs whose nearest usable HCA is on another NUMA node (SYS, or the legacy SOC).

    Their rank is bound to the GPU's CPUs (the ssh launcher's bind.py, Slurm's --cpu-bind with
    --gpu-bind=closest), so every byte they send crosses the inter-socket link on its way to the HCA.
    """
    far = []
    for gpu in topo.gpus:
        paths = [(nic, topo.matrix.get(gpu, {}).get(nic) or "") for nic in nics]
        known = sorted(((nic, p) for nic, p in paths if nccl_path(p)), key=lambda np: path_rank(np[1]))
        if known and nccl_path(known[0][1]) == "SYS":
            far.append(f"{gpu} ({known[0][0]})")
    if not far:
        return []
    return [
        Finding(
            severity="warning",
            code="hca-other-numa-node",
            message=f"{', '.join(far)}: the nearest HCA NCCL may use is on another NUMA node (SYS): the rank, "
            "bound near its GPU, reaches the fabric across the inter-socket link",
            advice="Let NCCL use an HCA on each GPU's socket (fabric.hca: one per GPU or per socket), or move the "
            "HCA to a slot under the same socket as the GPUs.",
            node=expect.node,
        )
    ]


# NCCL_NET_GDR_READ unset: sends (the NIC reading GPU memory) use GDR only where the GPU has an NVLink
# peer (or, in 2.6+, is the only GPU); from NCCL 2.19 only GPUs older than Ampere (compute capability < 8.0) need one
# (ncclTopoCheckGdr's `read` branch, v2.5.6-2 net.cc and v2.19.1-1 paths.cc).
_GDR_READ_NOTE = (
    " (receives; without NVLink between GPUs sends use it only on Ampere or newer GPUs with NCCL 2.19+, "
    "or with NCCL_NET_GDR_READ=1)"
)


def _has_nvlink(topo: NvidiaSmiTopo, gpu: str) -> bool:
    """Whether ``gpu`` has an NVLink peer in the matrix (a single GPU counts as having one, as in NCCL)."""
    others = [other for other in topo.gpus if other != gpu]
    return not others or any(re.fullmatch(r"NV\d+", topo.matrix.get(gpu, {}).get(o) or "") for o in others)


def _gpu_gdr(
    gpu: str, topo: NvidiaSmiTopo, nics: list[str], policy: GdrPolicy, expect: Expectation
) -> Finding | None:
    """One GPU's GDR finding against the HCAs NCCL may use; None when the matrix has no path to them."""
    paths = {nic: topo.matrix.get(gpu, {}).get(nic) for nic in nics}
    known = sorted(
        ((nic, p) for nic, p in paths.items() if p and nccl_path(p)), key=lambda np: path_rank(np[1])
    )
    if not known:
        return None
    legacy = policy.legacy
    judge = legacy if legacy is not None else False  # unknown version: today's rules, advice names both
    nearest, path = known[0]
    level = f"NCCL_NET_GDR_LEVEL={policy.describe()}" + (
        f" with NCCL {policy.version}"
        if policy.version
        else " (NCCL version unknown: judged by NCCL 2.6+ rules)"
    )
    without = [f"{nic} ({p})" for nic, p in known[1:] if not policy.enabled(p, judge)]
    if policy.enabled(path, judge):
        rest = f"; not to {', '.join(without)}" if without else ""
        return Finding(
            severity="info",
            code="gdr-usable",
            message=f"{gpu}: GPUDirect RDMA to {nearest} ({path}){rest} at {level}"
            + ("" if _has_nvlink(topo, gpu) else _GDR_READ_NOTE),
            node=expect.node,
        )
    cost = (
        " Enabling it costs: the RDMA traffic then crosses the inter-socket link (QPI/UPI), which is often "
        "slower than staging through host memory, so measure both before keeping it."
        if nccl_path(path) == "SYS"
        else " Check with an nccl-tests run that the change helps."
    )
    return Finding(
        severity="warning",
        code="gdr-not-used-topology",
        message=f"{gpu}: the nearest HCA NCCL may use, {nearest}, is {path} away; at {level} NCCL stages "
        "through host memory instead of using GPUDirect RDMA, so enabling GDR gains nothing here",
        advice=f"{policy.enabling_advice(path)} would enable it.{cost} Better: put the HCA on the same PCIe "
        "switch or socket as the GPUs, or let NCCL use an HCA near this GPU (NCCL_IB_HCA / fabric.hca).",
        node=expect.node,
    )


def chosen_nic_rules(
    topo: NvidiaSmiTopo, gpu_nics: Mapping[int, list[str]], gpu_gdr: Mapping[int, bool], expect: Expectation
) -> list[Finding]:
    """Each GPU judged against the HCA NCCL's log says its channels used, not the nearest one.

    ``gpu_nics``/``gpu_gdr``: per GPU (cudaDev, read as ``GPU<n>`` of the matrix, which holds when the
    ranks see every GPU in bus order), the HCA ports its network channels went through and whether
    all of them said /GDRDMA. A GPU whose NIC is farther than the nearest HCA NCCL may use crosses
    PCIe switches or the CPU for every byte (a rail warning); a GPU whose NIC is within the GDR level
    yet whose channels staged through host memory lost GPUDirect RDMA (a GDR warning). HCAs the log
    names only by index (``NET/IB/0``) or the matrix does not show are left unjudged.
    """
    if topo.error:
        return []
    policy = GdrPolicy(expect.nccl_version, expect.gdr_level)
    judge = bool(policy.legacy)
    allowed = [nic for nic in topo.nics if not expect.hca or nic in expect.hca]
    findings = []
    for gpu, used in sorted(gpu_nics.items()):
        row = topo.matrix.get(f"GPU{gpu}", {})
        for port in used:
            nic = port.split(":")[0]
            path = row.get(nic)
            if not path or nccl_path(path) is None:
                continue
            nearest = min(allowed, key=lambda n: path_rank(row.get(n) or ""), default=nic)
            if path_rank(path) > path_rank(row.get(nearest) or ""):
                findings.append(
                    Finding(
                        severity="warning",
                        code="gpu-nic-not-nearest",
                        message=f"GPU{gpu}: NCCL's channels went through {nic} ({path}) although {nearest} is "
                        f"{row.get(nearest)}: every byte of this GPU crosses more of the PCIe tree than it must",
                        advice="List the HCA nearest each GPU in fabric.hca (NCCL_IB_HCA) and check its port is up; "
                        "NCCL pairs a GPU with a farther HCA only when the near one is missing or filtered out",
                        node=expect.node,
                    )
                )
            if policy.enabled(path, judge) and gpu_gdr.get(gpu) is False:
                findings.append(
                    Finding(
                        severity="warning",
                        code="gdr-not-used-chosen-nic",
                        message=f"GPU{gpu}: its channels through {nic} ({path}) staged through host memory, "
                        f"although NCCL_NET_GDR_LEVEL={policy.describe()} allows GPUDirect RDMA on that path",
                        advice=GDR_DISABLED_ADVICE,
                        node=expect.node,
                    )
                )
    return findings


def ofed_rules(info: OfedInfo, expect: Expectation) -> list[Finding]:
    """MLNX_OFED missing where an RDMA fabric is expected."""
    if info.installed is False and expect.link_layer is not None:
        return [
            Finding(
                severity="warning",
                code="ofed-not-installed",
                message=f"ofed_info is not installed: {info.error}",
                advice="Inbox rdma-core works for verbs, but GPUDirect RDMA through a peer-memory module needs "
                "MLNX_OFED or DOCA-OFED: both nv_peer_mem and nvidia_peermem (driver R470+) plug into the "
                "PeerDirect API that only their ib_core has. Without it NCCL can still use GDR through DMA-BUF "
                "(Linux 5.12+, NCCL 2.13+, open GPU kernel modules).",
                node=expect.node,
            )
        ]
    return []


def nccl_log_rules(log: NcclLog, expect: Expectation) -> list[Finding]:
    """NCCL on sockets instead of IB, NCCL warnings, and what NCCL said of its net and GPUDirect RDMA."""
    findings = [
        Finding(severity="error", code="nccl-error", message=error, node=expect.node)
        for error in log.errors[:20]
    ]
    findings += _nccl_net_facts(log, expect) + _nccl_tuning_facts(log, expect)
    if log.transport == "Socket" and expect.link_layer != "Ethernet":
        findings.append(
            Finding(
                severity="error",
                code="nccl-socket-fallback",
                message=f"NCCL used TCP sockets ({', '.join(log.socket_interfaces)}), not InfiniBand verbs",
                advice="Pass /dev/infiniband and IPC_LOCK to the container and install libibverbs there; "
                "sockets are often 4-5x slower (horovod#288).",
                node=expect.node,
            )
        )
    return findings


# The link layer NCCL lists an HCA with, as ibstat names it.
_NCCL_LINK_LAYER = {"IB": "InfiniBand", "RoCE": "Ethernet"}


def _nccl_net_facts(log: NcclLog, expect: Expectation) -> list[Finding]:
    """An info with the net, plugins, link layers and DMA-BUF; GDR disabled per HCA; a link layer mismatch."""
    facts = [
        f"transport NET/{log.transport}"
        + (" (named only in WARN lines)" if log.transport_from_errors else "")
        if log.transport
        else "",
        f"network {log.network}" if log.network else "",
        f"net plugin {log.net_plugin}" if log.net_plugin else "",
        f"collnet plugin {log.collnet_plugin}" if log.collnet_plugin else "",
        ", ".join(f"{port}/{layer}" for port, layer in log.link_layers.items()),
        f"SHARP on {len(log.sharp_hcas)} HCA(s)" if log.sharp_hcas else "",
        f"DMA-BUF available on GPU {', '.join(map(str, log.dmabuf_gpus))}" if log.dmabuf_gpus else "",
        f"{log.gdr_channels} of {log.net_channels} network channels GDRDMA" if log.net_channels else "",
    ]
    findings = []
    if said := [fact for fact in facts if fact]:
        findings.append(Finding(severity="info", code="nccl-net", message="; ".join(said), node=expect.node))
    if log.gdr_disabled:
        findings.append(
            Finding(
                severity="warning",
                code="nccl-gdr-disabled",
                message=f"NCCL disabled GPUDirect RDMA for {gdr_disabled_in_words(log.gdr_disabled)}",
                advice=GDR_DISABLED_ADVICE,
                node=expect.node,
            )
        )
    wrong = [f"{p}/{layer}" for p, layer in log.link_layers.items() if expect.link_layer
             and _NCCL_LINK_LAYER[layer] != expect.link_layer]  # fmt: skip
    if wrong:
        findings.append(
            Finding(
                severity="warning",
                code="nccl-link-layer-mismatch",
                message=f"NCCL listed {', '.join(wrong)}, the expected link layer is {expect.link_layer}",
                advice="Set the fabric kind to the HCAs' link layer, or name the right HCAs (NCCL_IB_HCA).",
                node=expect.node,
            )
        )
    return findings


def _nccl_tuning_facts(log: NcclLog, expect: Expectation) -> list[Finding]:
    """An info with the algorithm/protocol NCCL chose per collective (TUNING lines, named or numeric)."""
    if not log.tuning:
        return []
    said = [
        f"{collective or 'collective not named'} "
        + ", ".join(f"{choice} x{calls}" for choice, calls in sorted(chosen.items(), key=lambda kv: -kv[1]))
        for collective, chosen in log.tuning.items()
    ]
    return [
        Finding(
            severity="info",
            code="nccl-tuning",
            message="NCCL chose (algorithm/protocol, calls): " + "; ".join(said),
            node=expect.node,
        )
    ]


def mpi_error_rules(error: MpiError, expect: Expectation) -> list[Finding]:
    """One finding naming the MPI failure category."""
    severity = "warning" if error.category in ("openib-no-active-ports", "unknown") else "error"
    return [Finding(severity=severity, code=f"mpi-{error.category}", message=error.summary, node=expect.node)]


def nccl_tests_rules(result: NcclTestsOutput, expect: Expectation) -> list[Finding]:
    """Wrong values, failures, or no result."""
    findings = [
        Finding(severity="error", code="nccl-tests-failure", message=e, node=expect.node)
        for e in result.errors
    ]
    if result.out_of_bounds_ok is False or (result.out_of_bounds or 0) > 0:
        findings.append(
            Finding(
                severity="error",
                code="nccl-tests-wrong-values",
                message=f"{result.out_of_bounds} values out of bounds",
            )
        )
    if result.avg_bus_bandwidth_gb_per_s is None:
        findings.append(
            Finding(severity="error", code="nccl-tests-no-result", message="no `# Avg bus bandwidth` line")
        )
    return findings + separate_jobs_rules(result, expect.node)


def separate_jobs_rules(result: NcclTestsOutput, node: str | None = None) -> list[Finding]:
    """Several nccl-tests jobs in one output: a binary built without MPI, started by mpirun or srun,
    runs one job per process, so no byte crossed the fabric and the bandwidth is each node's own.

    Seen by the repeated headers, Rank 0 lines or summaries; or, in a copy of the table alone, by each
    message size printed several times with a busbw of 0 (one rank moves nothing over a bus), or by
    several processes whose NCCL init line says ``nranks 1``.
    """
    if result.jobs > 1:
        seen = (
            f"the output holds {result.jobs} separate nccl-tests jobs (each prints its own header, "
            "its own Rank 0 or its own summary)"
        )
    elif result.repeated_rows > 1 and result.single_rank_rows >= result.repeated_rows:
        seen = (
            f"each message size appears up to {result.repeated_rows} times, and {result.single_rank_rows} rows "
            "move data (algbw above 0) with a busbw of 0 (several one-rank jobs printing the same table)"
        )
    elif result.single_rank_processes > 1:
        seen = (
            f"{result.single_rank_processes} processes each set up NCCL with `nranks 1` (several one-rank "
            "jobs, not one job over all ranks)"
        )
    else:
        return []
    return [
        Finding(
            severity="error",
            code="nccl-tests-not-mpi",
            message=f"{seen}: nccl-tests was built without MPI, so every process ran alone and the figures "
            "are one GPU's or one node's, not the fabric's",
            advice="Rebuild nccl-tests with MPI (`make clean && make MPI=1 MPI_HOME=<your MPI>`) and launch it "
            "with mpirun or srun; one job prints one header and ranks 0..N-1 once.",
            node=node,
        )
    ]


def throughput_rules(result: TfCnnBenchmarksOutput | HorovodSynthetic, expect: Expectation) -> list[Finding]:
    """A benchmark log without its total throughput line did not finish."""
    if result.total_images_per_sec is None:
        return [
            Finding(
                severity="error",
                code="no-total-throughput",
                message="the log has no total images/sec line: the run did not finish",
                node=expect.node,
            )
        ]
    return []


def version_rules(label: str, versions: dict[str, str | None], expected: str | None = None) -> list[Finding]:
    """Nodes whose ``label`` version differs from the others or from ``expected``."""
    seen = {node: version for node, version in versions.items() if version}
    distinct = sorted(set(seen.values()))
    findings: list[Finding] = []
    if len(distinct) > 1:
        detail = ", ".join(f"{node}={version}" for node, version in sorted(seen.items()))
        findings.append(
            Finding(
                severity="error",
                code=f"{label}-version-mismatch",
                message=f"{label} versions differ between nodes: {detail}",
                advice="Install the same version on every node; mismatched stacks fail or slow down at run time.",
            )
        )
    if expected:
        findings.extend(
            Finding(
                severity="warning",
                code=f"{label}-version-unexpected",
                message=f"{label} {version} on {node}; the inventory expects {expected}",
                node=node,
            )
            for node, version in sorted(seen.items())
            if not version.startswith(expected)
        )
    return findings


def _port_down(where: str, state: str, used: bool, expect: Expectation) -> Finding:
    return Finding(
        severity="error" if used else "info",
        code="ib-port-down",
        message=f"{where} is not up ({state})",
        advice="Check the cable and the subnet manager (`sminfo`); a port in Polling has no link, Disabled was "
        "turned off." + ("" if used else " This port is not the inventory's HCA."),
        node=expect.node,
    )


def _link_layer(where: str, layer: str, expect: Expectation) -> Finding:
    return Finding(
        severity="error",
        code="ib-link-layer-unexpected",
        message=f"{where} link layer is {layer}; {expect.link_layer} expected",
        advice="Set the port type with `mlxconfig ... LINK_TYPE_P1` or fix fabric.kind in the inventory.",
        node=expect.node,
    )


def _missing(command: str, error: str, expect: Expectation) -> Finding:
    return Finding(
        severity="warning",
        code="diagnostic-unavailable",
        message=f"{command} gave no data: {error}",
        advice="Install the tool on the host (or run it without wrong arguments) to check this.",
        node=expect.node,
    )


RULES: dict[str, Callable[..., list[Finding]]] = {
    "ibstat": ib_rules,
    "ibstatus": ib_rules,
    "ibv-devinfo": devinfo_rules,
    "nvidia-smi-topo": topology_rules,
    "ofed-info": ofed_rules,
    "nccl-log": nccl_log_rules,
    "mpi-error": mpi_error_rules,
    "nccl-tests": nccl_tests_rules,
    "tf-cnn-benchmarks": throughput_rules,
    "horovod-synthetic": throughput_rules,
}


def apply_rules(kind: str, parsed: Parsed, expect: Expectation | None = None) -> list[Finding]:
    """The findings for one parsed output of ``kind``: its main rule's, then the host rules' (rules_host)."""
    rules = [*([RULES[kind]] if kind in RULES else []), *HOST_RULES.get(kind, [])]
    return [finding for rule in rules for finding in rule(parsed, expect or Expectation())]
