"""Proof the fabric was used: which transport NCCL chose, read from its INFO lines.

NCCL falls back to TCP sockets silently when the container lacks the verbs libraries or
/dev/infiniband (horovod#288); only its log says so. A multi-node GPU run on an InfiniBand or RoCE
inventory that used ``NET/Socket`` is invalid, whatever its speed.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from clusterctl.diagnostics.parsers.nccl_log import parse_nccl_log
from clusterctl.findings import Finding

CPU_TRANSPORT = "none (CPU run, no NCCL)"
SINGLE_NODE_TRANSPORT = "none (single node, no network transport)"
UNKNOWN_TRANSPORT = "unknown (no NCCL NET lines in the log)"


class FabricProof(BaseModel):
    """What the log shows about the fabric, and whether that matches the inventory."""

    fabric_kind: str = Field(description="What the inventory says: infiniband, roce or ethernet.")
    transport: str = Field(description="NET/IB, NET/Socket, or a 'none'/'unknown' sentence.")
    gdr: bool | None = Field(None, description="GPUDirect RDMA used (GDRDMA); None when no NCCL ran.")
    hcas: list[str] = Field(default_factory=list, description="HCA ports NCCL used, e.g. mlx5_0:1.")
    valid: bool = Field(description="False when the transport contradicts the inventory.")
    reason: str | None = Field(None, description="Why the run is invalid, when it is.")


def prove_fabric(log: str, *, fabric_kind: str, gpu: bool, nodes: int) -> FabricProof:
    """Read NCCL's transport from ``log`` and judge it against the inventory's ``fabric_kind``."""
    if not gpu:
        return FabricProof(fabric_kind=fabric_kind, transport=CPU_TRANSPORT, valid=True)
    nccl = parse_nccl_log(log)
    if nccl.transport is None:
        transport = SINGLE_NODE_TRANSPORT if nodes == 1 else UNKNOWN_TRANSPORT
        return FabricProof(fabric_kind=fabric_kind, transport=transport, valid=True)
    transport = f"NET/{nccl.transport}"
    rdma = fabric_kind in ("infiniband", "roce")
    reason = None
    if rdma and nccl.transport == "Socket" and nodes > 1:
        reason = (
            f"the inventory's fabric is {fabric_kind} but NCCL used NET/Socket (TCP): the numbers "
            "measure Ethernet/IPoIB sockets, not RDMA"
        )
    return FabricProof(
        fabric_kind=fabric_kind,
        transport=transport,
        gdr=nccl.gdr,
        hcas=nccl.hcas,
        valid=reason is None,
        reason=reason,
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
                advice="keep NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=NET (clusterctl sets both)",
            )
        ]
    return []
