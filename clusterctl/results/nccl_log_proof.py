"""Proof the fabric was used: which transport NCCL chose, read from its INFO lines.

NCCL falls back to TCP sockets silently when the container lacks the verbs libraries or
/dev/infiniband (horovod#288); only its log says so. A multi-node GPU run on an InfiniBand or RoCE
inventory that used ``NET/Socket`` is invalid, whatever its speed.

Two weaker shortfalls are warnings: a multi-rail node whose network channels went through fewer
HCAs than the inventory lists (a rail down, missing in the container, or filtered out: the run
measured part of the fabric), and a GPUDirect level asked for while no channel says ``/GDRDMA``
(nvidia_peermem not loaded, or the GPU-NIC path beyond the level: every transfer is staged
through host memory).

How NCCL reduced is read from its INIT and TUNING lines: the algorithm/protocol of every allreduce
call (``algorithms``), NVLS multicast, ring channels; ``in_network`` says whether the log shows
in-network reduction across nodes (CollNet chosen, or NVLS chosen with a collnet plugin loaded; or, on an
NCCL too old to print its choices, a SHARP collnet plugin loaded over /SHARP HCAs), which lowers the
proof by counters' mean floor. NVLS alone reduces inside a node's NVSwitch and lowers nothing.

The log is GPUDirect RDMA's ground truth: ``/GDRDMA`` channels or ``DMA-BUF is available`` settle a
peer-memory finding of the run's topology snapshot (an info, never an error, for that run); HCAs the
log says NCCL disabled GDR on are named with NCCL's reason; and the link layer NCCL listed for each
HCA (``/IB``, ``/RoCE``) is checked against the inventory's fabric kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from clusterctl.diagnostics.model import untangled
from clusterctl.diagnostics.parsers.nccl_log import (
    GDR_DISABLED_ADVICE,
    NcclLog,
    gdr_disabled_in_words,
    parse_nccl_log,
)
from clusterctl.findings import Finding

CPU_TRANSPORT = "none (CPU run, no NCCL)"
SINGLE_NODE_TRANSPORT = "none (single node, no network transport)"
UNKNOWN_TRANSPORT = "unknown (no NCCL NET lines in the log)"


class FabricProof(BaseModel):
    """What the log shows about the fabric, and whether that matches the inventory."""

    fabric_kind: str = Field(description="What the inventory says: infiniband, roce or ethernet.")
    transport: str = Field(description="NET/IB, NET/Socket, or a 'none'/'unknown' sentence.")
    gdr: bool | None = Field(None, description="GPUDirect RDMA used (GDRDMA); None when no NCCL ran.")
    hcas: list[str] = Field(
        default_factory=list, description="HCA ports NCCL listed as usable, e.g. mlx5_0:1."
    )
    hcas_used: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per host in the log: the HCA ports its network channels went through.",
    )
    net_channels: int = Field(0, description="Network channel lines over IB verbs.")
    gdr_channels: int = Field(0, description="Of those, the ones with GPUDirect RDMA (/GDRDMA).")
    rails_short: dict[str, str] = Field(
        default_factory=dict,
        description="Per host whose channels used fewer HCAs than the inventory lists: what it used, in words.",
    )
    network: str | None = Field(None, description="NCCL's 'Using network' (IB, IBext_v8, Socket...).")
    link_layers: dict[str, str] = Field(
        default_factory=dict, description='Per HCA port NCCL listed: "IB" or "RoCE".'
    )
    link_layer_mismatch: list[str] = Field(
        default_factory=list,
        description="HCA ports whose link layer contradicts the inventory's fabric kind, e.g. 'mlx5_0:1 (RoCE)'.",
    )
    dmabuf: bool = Field(False, description="NCCL said DMA-BUF is available on a GPU (GDR needs no module).")
    gdr_disabled: dict[str, str] = Field(
        default_factory=dict, description="HCAs NCCL disabled GPUDirect RDMA on, with the reason it gave."
    )
    gdr_missing: bool = Field(
        False, description="A GPUDirect level was set, channels crossed the network, and none said GDRDMA."
    )
    algorithms: dict[str, int] = Field(
        default_factory=dict,
        description='AllReduce calls per algorithm/protocol NCCL chose, e.g. {"RING/SIMPLE": 40}; empty: not printed.',
    )
    in_network: bool = Field(
        False, description="The log shows in-network reduction across nodes (CollNet/SHARP; not NVLS alone)."
    )
    nvls_multicast: bool | None = Field(None, description="NCCL said NVLS multicast is (not) available.")
    channels: int | None = Field(None, description="Ring channels NCCL set up.")
    gpu_nics: dict[str, dict[int, list[str]]] = Field(
        default_factory=dict, description="Per host, per GPU: the HCA ports its network channels used."
    )
    gpu_gdr: dict[str, dict[int, bool]] = Field(
        default_factory=dict, description="Per host, per GPU: every network channel of it said /GDRDMA."
    )
    valid: bool = Field(description="False when the transport contradicts the inventory.")
    reason: str | None = Field(None, description="Why the run is invalid, when it is.")

    @property
    def algorithm_words(self) -> str:
        """The algorithms NCCL chose, most used first, e.g. 'RING/SIMPLE 40, TREE/LL 2'; '' when unknown."""
        ranked = sorted(self.algorithms.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{name} {count}" for name, count in ranked)


def prove_fabric(
    log: str,
    *,
    fabric_kind: str,
    gpu: bool,
    nodes: int,
    hcas: Sequence[str] = (),
    ranks_per_node: int | None = None,
    gdr_level: int | None = None,
) -> FabricProof:
    """Read NCCL's transport from ``log`` and judge it against the inventory.

    Args:
        log: the run's output (every rank's lines).
        fabric_kind: the inventory's fabric kind.
        gpu: whether the ranks ran on GPUs (NCCL); a CPU run has no NCCL to judge.
        nodes: nodes in the run.
        hcas: the inventory's HCAs (``mlx5_0`` or ``mlx5_0:1``); with more than one, every host's
            channels must go through all of them, or through one per rank when it runs fewer ranks.
        ranks_per_node: the fewest ranks any node of the run runs (NCCL gives each GPU its nearest
            rail, so fewer ranks use fewer rails); None: no such limit.
        gdr_level: NCCL_NET_GDR_LEVEL of the run; 1 or more asks for GPUDirect RDMA.
    """
    if not gpu:
        return FabricProof(fabric_kind=fabric_kind, transport=CPU_TRANSPORT, valid=True)
    nccl = parse_nccl_log(untangled(log))  # a rank's NCCL line glued after another's: its own line
    how = {
        "algorithms": nccl.algorithms,
        "in_network": in_network_reduction(nccl),
        "nvls_multicast": nccl.nvls_multicast,
        "channels": nccl.channels,
        "gpu_nics": nccl.gpu_nics,
        "gpu_gdr": nccl.gpu_gdr,
    }
    if nccl.transport is None:
        transport = SINGLE_NODE_TRANSPORT if nodes == 1 else UNKNOWN_TRANSPORT
        # DMA-BUF is printed at init, before any NET line: it still settles peer memory.
        return FabricProof(
            fabric_kind=fabric_kind, transport=transport, dmabuf=bool(nccl.dmabuf_gpus), valid=True, **how
        )
    transport = f"NET/{nccl.transport}" + (
        " (named only in WARN lines)" if nccl.transport_from_errors else ""
    )
    rdma = fabric_kind in ("infiniband", "roce")
    reason = None
    if rdma and nccl.transport == "Socket" and nodes > 1:
        reason = (
            f"the inventory's fabric is {fabric_kind} but NCCL used NET/Socket (TCP): the numbers "
            "measure Ethernet/IPoIB sockets, not RDMA"
        )
    multi_node_rdma = rdma and nodes > 1 and nccl.transport == "IB"
    wanted = min(len(hcas), ranks_per_node or len(hcas))
    rails_short = {
        host: _rails_in_words(used, hcas)
        for host, used in nccl.hcas_used.items()
        if multi_node_rdma and len(hcas) > 1 and len(used) < wanted
    }
    return FabricProof(
        fabric_kind=fabric_kind,
        transport=transport,
        gdr=nccl.gdr,
        hcas=nccl.hcas,
        hcas_used=nccl.hcas_used,
        net_channels=nccl.net_channels,
        gdr_channels=nccl.gdr_channels,
        network=nccl.network,
        link_layers=nccl.link_layers,
        link_layer_mismatch=_link_layer_mismatch(nccl.link_layers, fabric_kind),
        dmabuf=bool(nccl.dmabuf_gpus),
        gdr_disabled=nccl.gdr_disabled,
        rails_short=rails_short,
        gdr_missing=multi_node_rdma and bool(gdr_level) and nccl.net_channels > 0 and nccl.gdr_channels == 0,
        valid=reason is None,
        reason=reason,
        **how,
    )


# Algorithms that reduce between nodes in the network (SHARP switches through a collnet plugin).
COLLNET_ALGORITHMS = frozenset({"COLLNET", "COLLNET_DIRECT", "COLLNET_CHAIN"})


def in_network_reduction(nccl: NcclLog) -> bool:
    """Whether the log shows the allreduces reduced in the network *across nodes* (the lower mean floor).

    Where NCCL printed its choices (TUNING), a chosen CollNet algorithm counts, and NVLS only with a
    collnet plugin loaded: NVLS reduces in a node's NVSwitch, and NCCL runs it across nodes only over
    CollNet (its tuner: "NVLS intra+inter-node: collNetSupport"); NVLS_TREE runs a tree between nodes.
    Where it printed none (before 2.20 it logged them at TRACE only), a SHARP collnet plugin loaded over
    HCAs listed with /SHARP is taken as in-network reduction.
    """
    if nccl.algorithms:
        chosen = {key.split("/")[0] for key in nccl.algorithms}
        return bool(chosen & COLLNET_ALGORITHMS) or ("NVLS" in chosen and nccl.collnet_plugin is not None)
    return bool(nccl.sharp_hcas) and "SHARP" in (nccl.collnet_plugin or "").upper()


# The link layer NCCL lists an HCA with on each RDMA fabric kind.
_LINK_LAYER = {"infiniband": "IB", "roce": "RoCE"}


def _link_layer_mismatch(link_layers: Mapping[str, str], fabric_kind: str) -> list[str]:
    """The HCA ports whose listed link layer is not the one the inventory's fabric kind implies."""
    wanted = _LINK_LAYER.get(fabric_kind)
    return [f"{port} ({layer})" for port, layer in link_layers.items() if wanted and layer != wanted]


def _rails_in_words(used: Sequence[str], listed: Sequence[str]) -> str:
    """``used`` against the inventory's ``listed`` HCAs: how many, which, and which not (when named)."""
    devices = {u.split(":")[0] for u in used}
    unused = [h for h in listed if h.split(":")[0] not in devices]
    named = len(unused) == len(listed) - len(devices)  # false when the log gave indexes, not names
    return f"{len(used)} of {len(listed)} ({', '.join(used)})" + (
        f"; unused: {', '.join(unused)}" if named and unused else ""
    )


def fabric_findings(proof: FabricProof) -> list[Finding]:
    """An error for an invalid proof; a warning when a multi-node GPU run left no trace of NCCL."""
    if proof.reason:
        return [
            Finding(
                severity="error",
                code="fabric-not-used",
                message=proof.reason,
                advice="give the container /dev/infiniband, IPC_LOCK and the verbs libraries (ibverbs-providers); "
                "`clusterctl check` lists what is missing",
            )
        ]
    if proof.transport == UNKNOWN_TRANSPORT:
        return [
            Finding(
                severity="warning",
                code="fabric-unproven",
                message="NCCL printed no NET lines, so the transport used is not known",
                advice="keep NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET,TUNING (clusterctl sets both)",
            )
        ]
    findings = [
        Finding(
            severity="warning",
            code="fabric-rails-unused",
            message=f"{host or 'a host'}: NCCL's network channels used {used} of the HCAs the inventory lists",
            advice="the run measured part of the fabric: `clusterctl check` shows ports down or HCAs missing; "
            "each rank uses its GPU's nearest HCA, so compare `nvidia-smi topo -m` with fabric.hca",
            node=host or None,
        )
        for host, used in proof.rails_short.items()
    ]
    findings += _log_gdr_findings(proof)
    if proof.gdr_missing:
        findings.append(
            Finding(
                severity="warning",
                code="gdr-not-used",
                message=f"a GPUDirect RDMA level is set but none of the {proof.net_channels} network "
                "channels says GDRDMA: every transfer was staged through host memory",
                advice="load nvidia_peermem on the hosts (`clusterctl check` probes it) and compare the "
                "GPU-NIC paths of `nvidia-smi topo -m` with NCCL_NET_GDR_LEVEL",
            )
        )
    return findings


def _log_gdr_findings(proof: FabricProof) -> list[Finding]:
    """A link layer other than the inventory's fabric kind; the HCAs NCCL disabled GDR on, and why."""
    findings = []
    if proof.link_layer_mismatch:
        findings.append(
            Finding(
                severity="warning",
                code="fabric-link-layer-mismatch",
                message=f"the inventory's fabric is {proof.fabric_kind} but NCCL listed "
                f"{', '.join(proof.link_layer_mismatch)}: the run measured another fabric than the one declared",
                advice="set fabric.kind to what the HCAs' link layer is (`ibstat` 'Link layer'), or name the "
                "right HCAs in fabric.hca",
            )
        )
    if proof.gdr_disabled:
        findings.append(
            Finding(
                # Channels that did use GDRDMA went through other HCAs: the log says so, no harm shown.
                severity="info" if proof.gdr_channels else "warning",
                code="gdr-disabled-hca",
                message=f"NCCL disabled GPUDirect RDMA for {gdr_disabled_in_words(proof.gdr_disabled)}",
                advice=GDR_DISABLED_ADVICE,
            )
        )
    return findings


def settle_snapshot(snapshot: Sequence[Finding], proof: FabricProof) -> list[Finding]:
    """The peer-memory findings of the run's topology snapshot, as the run's log settles them.

    NCCL's log is the ground truth: where channels said /GDRDMA or NCCL said DMA-BUF is available, a
    missing peer-memory module did not keep GPUDirect RDMA from the run, and the finding becomes an info
    saying so. Otherwise it stays, as a warning at most: the run is judged by what it did (its log and
    counters), not by the snapshot.

    Args:
        snapshot: findings of the run's topology snapshot (``peermem-missing`` ones are read;
            ``snapshot-unreadable`` is passed on as it is).
        proof: the run's fabric proof.
    """
    settled_by = []
    if proof.gdr_channels:
        settled_by.append(f"{proof.gdr_channels} of {proof.net_channels} network channels used GDRDMA")
    if proof.dmabuf:
        settled_by.append("NCCL said DMA-BUF is available, so it needs no peer-memory module")
    findings = []
    for finding in snapshot:
        if finding.code == "snapshot-unreadable":  # the run should say its snapshot could not be judged
            findings.append(finding)
        if finding.code != "peermem-missing":
            continue
        if settled_by:
            findings.append(
                Finding(
                    severity="info",
                    code="peermem-settled-by-log",
                    message=f"the topology snapshot found no peer-memory module, but the run's NCCL log settles "
                    f"it: {'; '.join(settled_by)}",
                    node=finding.node,
                )
            )
        else:
            severity = "warning" if finding.severity == "error" else finding.severity
            findings.append(
                finding.model_copy(
                    update={"severity": severity, "message": f"topology snapshot: {finding.message}"}
                )
            )
    return findings
