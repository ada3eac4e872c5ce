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

**What a run must move.** Any allreduce of G bytes among N nodes without in-network reduction makes
the nodes send, and receive, at least 2(N-1)/N x G each across their links *on average*: each node must
export all but its 1/N share of the reduce-scatter and import the rest of the all-gather (the bandwidth
lower bound of Patarasuk and Yuan). Ring allreduce with one rank per node moves exactly that through
every node; NCCL's double binary tree moves it on average but not evenly: an interior node moves about
2G each way, a tree's root about G (at 4 nodes two nodes move ~G, two ~2G). Whatever the algorithm,
every node moves at least G each way: what it does not reduce itself must leave it, and what it does
reduce must go back out to the others. With in-network reduction across nodes (SHARP through NCCL's
CollNet) each node sends its G once and receives the result once: G on average too. NVLS reduces inside
a node's NVSwitch, not between nodes: it lowers nothing here. Per run, G is the bytes all-reduced per
rank over the run, the workload's ``allreduce_volume``.

**The floors.** Two, each ``1 - TIMING_TOLERANCE`` of its bound: every node's declared fabric must
have carried 90% of G (``floor_bytes_per_node``), and the mean over the nodes 90% of 2(N-1)/N x G
(``mean_floor_bytes_per_node``), or of G when NCCL's log shows in-network reduction across nodes
(``in_network``). The mean is judged only when every node was read: a subset could be a tree's roots.
``counter_expectation`` is the one place both are computed, for `run --dry-run` and for the judgement.
Counters are read before the ranks start and after they end, so they can only over-count the run
(start-up, bootstrap, TCP/IP and IB headers); the tolerance covers the few collectives a framework may
skip or fuse differently than counted and counters read on a busy HCA a moment early. Below a floor
the gradients went elsewhere (a management network, a socket fallback): invalid.

**RDMA bytes only.** An InfiniBand port's data counters count every IB packet, IPoIB's included: a
NCCL or MPI that fell back to TCP over the port's IPoIB netdev still fills the port. So, per HCA
port, the bytes of the IPoIB netdevs on it (sysfs maps each netdev to its HCA and port) are taken
out (``rdma_only``); both figures are kept. A run whose RDMA bytes are short while IPoIB carried the
rest went over IPoIB sockets, not RDMA: invalid, named so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from clusterctl.diagnostics.parsers.fabric_counters import NodeCounters, PortBytes
from clusterctl.findings import Finding
from clusterctl.inventory import FabricSpec, Inventory, Node

if TYPE_CHECKING:
    from clusterctl.workloads.base import Volume

# Counters can only over-count a run (read before it starts and after it ends); this share of the
# algorithm's bound covers a skipped or differently fused collective and a counter read a moment early.
TIMING_TOLERANCE = 0.10
# A rail that carried less than this share of its fair part (expected bytes / rails) carried nothing
# that matters: a port left idle by NCCL, down, or filtered out of NCCL_IB_HCA.
IDLE_FRACTION = 0.01

CounterReader = Callable[[Inventory, Sequence[Node]], dict[str, NodeCounters]]
"""Reads the fabric counters of the given nodes now; readings by node name
(``clusterctl.diagnostics.counter_reading.read_fabric_counters`` over SSH)."""

CounterReadings = tuple[dict[str, NodeCounters], dict[str, NodeCounters]]
"""The fabric counters of a run's nodes before and after it, by node name."""


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


def expected_bytes_per_node(allreduced_bytes: int, nodes: int) -> int:
    """The bytes a node sends (and receives), on average over ``nodes``, to all-reduce ``allreduced_bytes``.

    ``2(N-1)/N x G``: what ring allreduce moves per node with one rank per node, and the least any
    allreduce without in-network reduction moves across N nodes on average. 0 on one node.
    """
    return 2 * (nodes - 1) * allreduced_bytes // nodes


def _tolerated(bound: int) -> int:
    return int(bound * (1 - TIMING_TOLERANCE))


class CounterExpectation(BaseModel):
    """What the proof by counters expects of a run: said before it runs (`run --dry-run`) and judged after.

    Built by ``counter_expectation`` only, so the dry run and the judgement cannot disagree.
    """

    nodes: int
    allreduced_bytes: int = Field(description="G: bytes each rank all-reduces over the run.")
    derivation: str = Field(description="How ``allreduced_bytes`` was derived, in words.")
    expected_bytes_per_node: int = Field(description="2(N-1)/N x G: what a node moves on average.")
    floor_bytes_per_node: int = Field(
        description="90% of G: what every node's fabric must carry, whatever the algorithm (a tree's root "
        "moves about G)."
    )
    mean_floor_bytes_per_node: int = Field(
        description="90% of 2(N-1)/N x G: what the nodes' fabrics must carry on average."
    )
    in_network_mean_floor_bytes_per_node: int = Field(
        description="The mean floor when NCCL's log shows in-network reduction across nodes "
        "(CollNet/SHARP): 90% of G."
    )

    def mean_floor(self, *, in_network: bool) -> int:
        """The floor of the mean over nodes, by whether the log shows in-network reduction across nodes."""
        return self.in_network_mean_floor_bytes_per_node if in_network else self.mean_floor_bytes_per_node

    def words(self) -> str:
        """One line for people: the expectation and where it comes from."""
        if self.nodes < 2:
            return f"proof by counters: one node, nothing crosses the fabric ({self.derivation})"
        lower = (
            ""
            if self.in_network_mean_floor_bytes_per_node == self.mean_floor_bytes_per_node
            else f" ({_gb(self.in_network_mean_floor_bytes_per_node)} if the log shows in-network "
            "reduction across nodes)"
        )
        return (
            f"proof by counters: each node's fabric must carry >= {_gb(self.floor_bytes_per_node)} each way, "
            f"the nodes' mean >= {_gb(self.mean_floor_bytes_per_node)}{lower}; G = {self.derivation}, "
            f"2(N-1)/N x G = {_gb(self.expected_bytes_per_node)} per node on average"
        )


def counter_expectation(volume: Volume | None, nodes: int) -> CounterExpectation | None:
    """What ``nodes`` nodes must move to all-reduce ``volume`` per rank over a run (None: the workload
    does not say). The one place the floors are computed."""
    if volume is None:
        return None
    g = volume.bytes
    expected = expected_bytes_per_node(g, nodes)
    several = nodes >= 2
    return CounterExpectation(
        nodes=nodes,
        allreduced_bytes=g,
        derivation=volume.derivation,
        expected_bytes_per_node=expected,
        floor_bytes_per_node=_tolerated(g) if several else 0,
        mean_floor_bytes_per_node=_tolerated(expected) if several else 0,
        in_network_mean_floor_bytes_per_node=_tolerated(g) if several else 0,
    )


class NodeTraffic(BaseModel):
    """What one node's ports moved between the two readings."""

    rails: dict[str, PortBytes] = Field(
        default_factory=dict, description="The declared fabric's ports (interface or HCA ports)."
    )
    other: dict[str, PortBytes] = Field(
        default_factory=dict, description="Ports read but not the declared fabric (e.g. IPoIB's netdev)."
    )
    ipoib: dict[str, PortBytes] = Field(
        default_factory=dict,
        description="Per rail (HCA port): what the IPoIB netdevs on it moved, included in the rail's bytes.",
    )
    error: str | None = Field(None, description="Why this node's traffic is not known, when it is not.")

    @property
    def sent(self) -> int:
        """Bytes the declared fabric sent (every packet the ports counted)."""
        return sum(p.tx for p in self.rails.values())

    @property
    def received(self) -> int:
        """Bytes the declared fabric received (every packet the ports counted)."""
        return sum(p.rx for p in self.rails.values())

    @property
    def ipoib_sent(self) -> int:
        """Bytes of those the IPoIB netdevs on the rails sent (TCP/IP over InfiniBand)."""
        return sum(p.tx for p in self.ipoib.values())

    @property
    def ipoib_received(self) -> int:
        """Bytes of those the IPoIB netdevs on the rails received."""
        return sum(p.rx for p in self.ipoib.values())

    @property
    def rdma_sent(self) -> int:
        """Bytes the rails sent that were not IPoIB's (per rail, never below 0)."""
        return sum(max(0, p.tx - self.ipoib.get(n, PortBytes(tx=0, rx=0)).tx) for n, p in self.rails.items())

    @property
    def rdma_received(self) -> int:
        """Bytes the rails received that were not IPoIB's (per rail, never below 0)."""
        return sum(max(0, p.rx - self.ipoib.get(n, PortBytes(tx=0, rx=0)).rx) for n, p in self.rails.items())


class CounterProof(BaseModel):
    """The run's fabric traffic per node and rail, judged against what its allreduces had to move."""

    fabric: str = Field(description="What was judged: the interface, or 'HCA ports'.")
    expected_bytes_per_node: int | None = Field(
        None,
        description="2(N-1)/N x the bytes all-reduced over the run (a node's mean); None when the workload "
        "does not say.",
    )
    floor_bytes_per_node: int | None = Field(
        None, description="The least every node's fabric had to carry: 90% of G (a tree's root moves ~G)."
    )
    mean_floor_bytes_per_node: int | None = Field(
        None,
        description="The least the nodes' fabrics had to carry on average: 90% of 2(N-1)/N x G, or of G with "
        "in-network reduction across nodes.",
    )
    bound: str = Field(
        "ring/tree", description="Whose bound the mean floor is: 'ring/tree' or 'in-network' (CollNet/SHARP)."
    )
    rdma_only: bool = Field(
        False, description="Judged on RDMA bytes (the IPoIB netdevs' bytes taken out of their ports')."
    )
    nodes: dict[str, NodeTraffic] = Field(default_factory=dict)
    idle_rails: dict[str, list[str]] = Field(
        default_factory=dict, description="Per node: declared rails that carried nothing that matters."
    )
    rail_balance: float | None = Field(
        None, description="Least-used rail / most-used rail over every multi-rail node; None: one rail."
    )
    valid: bool = Field(description="False when a node's declared fabric carried far less than expected.")
    over_ipoib: bool = Field(
        False, description="Invalid because the traffic went over IPoIB sockets, not RDMA."
    )
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
    for rail in node.rails:
        moved = [node.other[n] for n in after.ipoib(rail) if n in node.other]
        if moved:
            node.ipoib[rail] = PortBytes(tx=sum(p.tx for p in moved), rx=sum(p.rx for p in moved))
    return node


def _fabric_words(fabric: FabricSpec) -> str:
    return fabric.interface if fabric.kind == "ethernet" else "HCA ports"


def prove_counters(
    before: Mapping[str, NodeCounters],
    after: Mapping[str, NodeCounters],
    *,
    fabric: FabricSpec,
    expectation: CounterExpectation | None,
    in_network: bool = False,
    rdma_only: bool = False,
) -> CounterProof:
    """Judge every node's fabric traffic between two readings (by node name). Pure.

    Invalid when, on a multi-node run with an expectation, some node's declared fabric sent or
    received less than the per-node floor (90% of G), or, every node read, their mean less than the
    mean floor (the ring/tree bound, or G with ``in_network`` reduction across nodes shown by NCCL's
    log). With ``rdma_only`` (a GPU run on InfiniBand/RoCE, whose gradients must go over verbs) the
    rails' IPoIB bytes do not count; a run short of RDMA bytes whose ports' totals, IPoIB included,
    pass is named: the traffic went over IPoIB sockets.
    """
    nodes = {
        name: traffic(before.get(name) or NodeCounters(error="not read before the run"), reading, fabric)
        for name, reading in after.items()
    }
    expected = expectation.expected_bytes_per_node if expectation else None
    several = expectation is not None and expectation.nodes >= 2 and expectation.allreduced_bytes > 0
    floor = expectation.floor_bytes_per_node if expectation and several else None
    mean_floor = expectation.mean_floor(in_network=in_network) if expectation and several else None
    idle = {name: _idle(t, expected) for name, t in nodes.items() if t.error is None}
    reason = None
    over_ipoib = False
    if floor is not None and mean_floor is not None:
        shortfall = _shortfall(nodes, rdma_only, floor, mean_floor)
        if shortfall and rdma_only and not _shortfall(nodes, False, floor, mean_floor):
            over_ipoib = True
            moved = ", ".join(
                f"{n} {_gb(_carried(nodes[n], True))} RDMA + "
                f"{_gb(min(nodes[n].ipoib_sent, nodes[n].ipoib_received))} IPoIB"
                for n in shortfall.names
            )
            reason = (
                f"traffic went over IPoIB sockets, not RDMA: {moved} against {shortfall.against}; NCCL or "
                "MPI fell back to TCP over the HCA's IPoIB interface"
            )
        elif shortfall:
            reason = (
                f"the fabric ({_fabric_words(fabric)}) carried far less than the run's allreduces had to move: "
                f"{shortfall.carried} against {shortfall.against} ({_bound_words(shortfall.mean, in_network)}); "
                "the traffic went over another network"
            )
    return CounterProof(
        fabric=_fabric_words(fabric),
        expected_bytes_per_node=expected,
        floor_bytes_per_node=floor,
        mean_floor_bytes_per_node=mean_floor,
        bound="in-network" if in_network else "ring/tree",
        rdma_only=rdma_only,
        nodes=nodes,
        idle_rails={k: v for k, v in idle.items() if v},
        rail_balance=_balance(nodes.values()),
        valid=reason is None,
        over_ipoib=over_ipoib,
        reason=reason,
    )


class _Shortfall(BaseModel):
    """Which floor a run missed: the nodes below the per-node floor, or (``mean``) the nodes' mean."""

    names: list[str]
    carried: str
    against: str
    mean: bool


def _shortfall(
    nodes: Mapping[str, NodeTraffic], rdma_only: bool, floor: int, mean_floor: int
) -> _Shortfall | None:
    """The floor the nodes' traffic (RDMA only or all) misses, per node first; None: both are met."""
    carried = {name: _carried(t, rdma_only) for name, t in nodes.items() if t.error is None}
    short = [name for name, value in carried.items() if value < floor]
    if short:
        return _Shortfall(
            names=short,
            carried=", ".join(f"{n} {_gb(carried[n])}" for n in short),
            against=f"a floor of {_gb(floor)} per node",
            mean=False,
        )
    if not carried or len(carried) < len(nodes):
        return None  # a node unread: the mean of the others is not the run's (they may be a tree's roots)
    mean = sum(carried.values()) / len(carried)
    if mean >= mean_floor:
        return None
    return _Shortfall(
        names=list(carried),
        carried=f"{_gb(mean)} per node on average ({', '.join(f'{n} {_gb(v)}' for n, v in carried.items())})",
        against=f"a floor of {_gb(mean_floor)} on average",
        mean=True,
    )


def _carried(node: NodeTraffic, rdma_only: bool) -> int:
    """What the node's fabric carried both ways (the lesser of sent and received), RDMA only or all."""
    if rdma_only:
        return min(node.rdma_sent, node.rdma_received)
    return min(node.sent, node.received)


def _bound_words(mean: bool, in_network: bool) -> str:
    share = f"{1 - TIMING_TOLERANCE:.0%}"
    if not mean:
        return f"{share} of G: every node moves at least G each way, whatever the algorithm"
    if in_network:
        return f"{share} of G, the in-network reduction bound NCCL's log shows"
    return f"{share} of the ring/tree bound 2(N-1)/N x G, the least any allreduce moves on average"


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
    if proof.over_ipoib:
        findings.append(
            Finding(
                severity="error",
                code="fabric-over-ipoib",
                message=proof.reason or "traffic went over IPoIB sockets, not RDMA",
                advice="give the container /dev/infiniband, IPC_LOCK and the verbs libraries "
                "(ibverbs-providers), name the HCAs NCCL may use in fabric.hca (NCCL_IB_HCA) and keep "
                "NCCL_IB_DISABLE=0; NCCL's log then says NET/IB, not NET/Socket (`clusterctl check`)",
            )
        )
    elif proof.reason:
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
