"""Proof by counters: the bytes each node's fabric moved during a run, against what the run had to move.

NCCL's and MPI's logs say which transport was *chosen*; only the ports' own counters say where the
bytes *went*. Before and after every run clusterctl reads, on every node of the run:

- per HCA port, ``port_xmit_data`` / ``port_rcv_data`` from sysfs (4-byte words), or ``perfquery -x``
  on a node whose sysfs has none (one call per HCA the inventory lists);
- the fabric interface's ``/sys/class/net/<if>/statistics/tx_bytes`` / ``rx_bytes`` (bytes): on an
  Ethernet fabric, the one rail; on InfiniBand/RoCE, shown beside the HCA ports (IPoIB or the
  RoCE netdev).

``clusterctl.diagnostics.parsers.fabric_counters`` holds the command that prints them and its
parser (a public pair: a batch script can print the same counters inside an allocation). This
module is pure: ``traffic`` diffs two readings, ``expected_bytes_per_node`` is what the allreduces
had to move, ``prove_counters`` judges, ``counter_findings`` says it in findings.

**What a run must move.** Any allreduce of G bytes among N nodes makes each node send, and receive,
at least 2(N-1)/N x G across its links (each node must export its share of the reduce-scatter and
import the rest of the all-gather); ring allreduce with one rank per node moves exactly that, and
NCCL's rings and trees, Horovod's hierarchical allreduce and Open MPI's large-message algorithms move
that or more (in-network reduction such as SHARP moves G: see ``SHORT_FRACTION``). Per run that is
``2(N-1)/N x gradient bytes x (warm-up + measured steps)``. A multi-node run whose declared fabric
carried less than ``SHORT_FRACTION`` of it on some node sent its gradients elsewhere (a management
network, IPoIB instead of verbs on another port...): invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters, PortBytes
from clusterctl.findings import Finding
from clusterctl.inventory import FabricSpec, Inventory, Node

# Below this share of the bytes the allreduces had to move, a node's declared fabric did not carry
# the run: TCP/IP and IB headers only add to the payload, so host-based allreduces read 100% or more.
# In-network reduction (SHARP, NCCL's CollNet/NVLS) sends each node's G once and receives the result
# once, G instead of 2(N-1)/N x G: never below half of it, so such runs stay valid at this share.
SHORT_FRACTION = 0.5
# A rail that carried less than this share of its fair part (expected bytes / rails) carried nothing
# that matters: a port left idle by NCCL, down, or filtered out of NCCL_IB_HCA.
IDLE_FRACTION = 0.01

CounterReader = Callable[[Inventory, Sequence[Node]], dict[str, NodeCounters]]
"""Reads the fabric counters of the given nodes now; readings by node name
(``clusterctl.results.counter_reading.read_fabric_counters`` over SSH)."""


def declared_rails(fabric: FabricSpec, ports: Sequence[str]) -> list[str]:
    """The ports of ``ports`` that are the inventory's fabric: the interface, or the HCA ports.

    InfiniBand/RoCE: the HCA ports of the listed HCAs (``mlx5_0`` takes each of its ports,
    ``mlx5_0:1`` that one), or every HCA port when the inventory lists none.
    """
    if fabric.kind == "ethernet":
        return [p for p in ports if p == fabric.interface]
    hca_ports = [p for p in ports if ":" in p]
    if not fabric.hca:
        return hca_ports
    return [p for p in hca_ports if p in fabric.hca or p.partition(":")[0] in fabric.hca]


def expected_bytes_per_node(gradient_bytes: int, steps: int, nodes: int) -> int:
    """The bytes each node must send (and receive) for ``steps`` allreduces of ``gradient_bytes``.

    ``2(N-1)/N x G x steps``: what ring allreduce moves per node with one rank per node, and the
    least any host-based allreduce algorithm moves across N nodes. 0 on one node.
    """
    return 2 * (nodes - 1) * gradient_bytes * steps // nodes


class NodeTraffic(BaseModel):
    """What one node's ports moved between the two readings."""

    rails: dict[str, PortBytes] = Field(
        default_factory=dict, description="The declared fabric's ports (interface or HCA ports)."
    )
    other: dict[str, PortBytes] = Field(
        default_factory=dict, description="Ports read but not the declared fabric (e.g. IPoIB's netdev)."
    )
    error: str | None = Field(None, description="Why this node's traffic is not known, when it is not.")

    @property
    def sent(self) -> int:
        """Bytes the declared fabric sent."""
        return sum(p.tx for p in self.rails.values())

    @property
    def received(self) -> int:
        """Bytes the declared fabric received."""
        return sum(p.rx for p in self.rails.values())


class CounterProof(BaseModel):
    """The run's fabric traffic per node and rail, judged against what its allreduces had to move."""

    fabric: str = Field(description="What was judged: the interface, or 'HCA ports'.")
    expected_bytes_per_node: int | None = Field(
        None, description="2(N-1)/N x gradient bytes x steps; None when the workload does not say."
    )
    nodes: dict[str, NodeTraffic] = Field(default_factory=dict)
    idle_rails: dict[str, list[str]] = Field(
        default_factory=dict, description="Per node: declared rails that carried nothing that matters."
    )
    rail_balance: float | None = Field(
        None, description="Least-used rail / most-used rail over every multi-rail node; None: one rail."
    )
    valid: bool = Field(description="False when a node's declared fabric carried far less than expected.")
    reason: str | None = None

    @property
    def bytes_per_node(self) -> float | None:
        """Mean bytes sent per node over the nodes that were read, None when none was."""
        sent = [t.sent for t in self.nodes.values() if t.error is None]
        return sum(sent) / len(sent) if sent else None


def traffic(before: NodeCounters, after: NodeCounters, fabric: FabricSpec) -> NodeTraffic:
    """What ``fabric``'s ports of one node moved between ``before`` and ``after``.

    A rail missing from either reading, or whose counters went backwards (reset, wrapped) or
    saturated, makes the node's traffic unknown (``error``), never a guess; another port with such a
    problem is only left out of ``other``.
    """
    for reading in (before, after):
        if reading.error and not reading.ports:
            return NodeTraffic(error=reading.error)
    rails = declared_rails(fabric, list(after.ports))
    if not rails:
        return NodeTraffic(error=after.error or f"no counters of {_fabric_words(fabric)} were read")
    node = NodeTraffic()
    for name, new in after.ports.items():
        old = before.ports.get(name)
        problem = (
            "not in the reading before the run"
            if old is None
            else "the counters went backwards (reset or wrapped)"
            if new.tx < old.tx or new.rx < old.rx
            else "32-bit data counters saturated; read them with perfquery -x"
            if name in after.saturated
            else None
        )
        if problem and name in rails:
            return NodeTraffic(error=f"{name}: {problem}")
        if old is not None and problem is None:
            (node.rails if name in rails else node.other)[name] = PortBytes(
                tx=new.tx - old.tx, rx=new.rx - old.rx
            )
    return node


def _fabric_words(fabric: FabricSpec) -> str:
    return fabric.interface if fabric.kind == "ethernet" else "HCA ports"


def prove_counters(
    before: Mapping[str, NodeCounters],
    after: Mapping[str, NodeCounters],
    *,
    fabric: FabricSpec,
    expected_bytes_per_node: int | None,
) -> CounterProof:
    """Judge every node's fabric traffic between two readings (by node name). Pure.

    Invalid when, on a multi-node run with an expectation, some node's declared fabric sent or
    received less than ``SHORT_FRACTION`` of ``expected_bytes_per_node``.
    """
    nodes = {
        name: traffic(before.get(name) or NodeCounters(error="not read before the run"), reading, fabric)
        for name, reading in after.items()
    }
    expected = expected_bytes_per_node or None
    idle = {name: _idle(t, expected) for name, t in nodes.items() if t.error is None}
    short = [
        f"{name} {_gb(min(t.sent, t.received))}"
        for name, t in nodes.items()
        if t.error is None
        and expected
        and len(nodes) > 1
        and min(t.sent, t.received) < SHORT_FRACTION * expected
    ]
    reason = None
    if short:
        reason = (
            f"the fabric ({_fabric_words(fabric)}) carried far less than the run's allreduces had to move: "
            f"{', '.join(short)} against {_gb(expected or 0)} per node; the traffic went over another network"
        )
    return CounterProof(
        fabric=_fabric_words(fabric),
        expected_bytes_per_node=expected_bytes_per_node,
        nodes=nodes,
        idle_rails={k: v for k, v in idle.items() if v},
        rail_balance=_balance(nodes.values()),
        valid=reason is None,
        reason=reason,
    )


def _idle(node: NodeTraffic, expected: int | None) -> list[str]:
    """Rails of a multi-rail node that carried under ``IDLE_FRACTION`` of their fair share."""
    if len(node.rails) < 2:
        return []
    moved = {name: p.tx + p.rx for name, p in node.rails.items()}
    share = 2 * expected / len(moved) if expected else max(moved.values())
    return sorted(name for name, value in moved.items() if share and value < IDLE_FRACTION * share)


def _balance(nodes: Iterable[NodeTraffic]) -> float | None:
    ratios = []
    for node in nodes:
        if node.error is None and len(node.rails) > 1:
            moved = [p.tx + p.rx for p in node.rails.values()]
            ratios.append(min(moved) / max(moved) if max(moved) else 0.0)
    return min(ratios) if ratios else None


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"


def counter_findings(proof: CounterProof) -> list[Finding]:
    """An error when the fabric carried far less than expected; warnings for idle rails and unread nodes."""
    findings = []
    if proof.reason:
        findings.append(
            Finding(
                severity="error",
                code="fabric-counters-short",
                message=proof.reason,
                advice="check which interface MPI, Gloo and NCCL were given (btl_tcp_if_include, "
                "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_IB_HCA) and that the inventory's fabric "
                "names the network the nodes' fabric addresses are on",
            )
        )
    findings += [
        Finding(
            severity="warning",
            code="fabric-rail-idle",
            message=f"{node}: rail(s) {', '.join(rails)} carried nothing during the run",
            advice="a port down, missing in the container or filtered out of NCCL_IB_HCA: the run measured "
            "part of the fabric (`clusterctl check` shows port states)",
            node=node,
        )
        for node, rails in proof.idle_rails.items()
    ]
    findings += [
        Finding(
            severity="warning",
            code="fabric-counters-unread",
            message=f"{node}: the fabric counters could not be compared: {t.error}",
            advice="the run's traffic on this node is unproven; `clusterctl check` probes the node",
            node=node,
        )
        for node, t in proof.nodes.items()
        if t.error
    ]
    return findings
