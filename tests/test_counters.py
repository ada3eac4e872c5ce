"""Proof by counters, the pure half: the counter command and its parser on real outputs, the bytes a run
must move, the diff of two readings and the judgement (short fabric, idle rails, unread nodes)."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clusterctl.diagnostics.counter_reading import read_fabric_counters
from clusterctl.diagnostics.parsers.fabric_counters import (
    NodeCounters,
    PortBytes,
    counter_command,
    parse_counter_output,
)
from clusterctl.diagnostics.parsers.nccl_log import NcclLog, parse_nccl_log
from clusterctl.inventory import FabricSpec, Inventory, Node, load_inventory, validate_document
from clusterctl.paths import data_dir
from clusterctl.results.counters import (
    TIMING_TOLERANCE,
    CounterExpectation,
    CounterProof,
    counter_expectation,
    counter_findings,
    expected_bytes_per_node,
    prove_counters,
)
from clusterctl.results.nccl_log_proof import in_network_reduction
from clusterctl.results.record import RunRecord
from clusterctl.run.backends.ssh import SshBackend, SshLaunch
from clusterctl.run.conductor import run_plans
from clusterctl.run.context import run_context
from clusterctl.run.judge import judge_run
from clusterctl.run.plan import plan_run
from clusterctl.workloads import get_workload
from clusterctl.workloads.base import Volume
from tests.fixtures import fixture_text

H100 = data_dir("inventories") / "modern-h100.yml"
NET = "net_statistics/eth0-and-missing-interface-grep.txt"
SYSFS = "sysfs_counters/gpud-h100-8ib-bond-port-data-grep.txt"
IPOIB_MAP = "net_statistics/cn-ib-notes-mlx4-ib0-dev-id-dev-port-ibdev-grep.txt"
IB = FabricSpec(kind="infiniband", interface="ib0", hca=["mlx4_0:1"])
PERFQUERY = "perfquery/infiniband-exporter-2port-extended.txt"
ETHERNET = FabricSpec(kind="ethernet", interface="eth0")
GB = 10**9


@pytest.fixture(scope="module")
def h100() -> Inventory:
    return load_inventory(H100)


def test_interface_counters_are_bytes_and_a_missing_interface_is_an_error() -> None:
    reading = parse_counter_output(fixture_text(NET))
    assert reading.ports == {"eth0": PortBytes(tx=5770551, rx=3403335965)}
    assert reading.error and "nosuch0" in reading.error
    assert reading.unparsed_lines == []


def test_sysfs_hca_counters_are_words_times_four() -> None:
    reading = parse_counter_output(fixture_text(SYSFS))
    assert set(reading.ports) == {f"mlx5_{i}:1" for i in (0, 1, 4, 5, 6, 7, 8, 9)} | {"mlx5_bond_0:1"}
    assert reading.ports["mlx5_0:1"].tx == 230442669431839 * 4
    assert reading.error is None and reading.saturated == []


def test_perfquery_blocks_take_the_hca_named_before_them() -> None:
    text = "# clusterctl perfquery mlx5_0\n" + fixture_text(PERFQUERY)
    reading = parse_counter_output(text)
    assert reading.ports == {
        "mlx5_0:1": PortBytes(tx=36298026860928 * 4, rx=12279028775751 * 4),
        "mlx5_0:2": PortBytes(tx=26006570014026 * 4, rx=39078804993378 * 4),
    }
    failed = parse_counter_output(
        "# clusterctl perfquery mlx5_3:1\nibwarn: [3245] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
    )
    assert failed.ports == {} and failed.error and "UMAD" in failed.error


def test_saturated_32_bit_counters_are_flagged() -> None:
    reading = parse_counter_output(f"/sys/class/infiniband/mlx4_0/ports/1/counters/port_xmit_data:{2**32 - 1}\n"
                                   "/sys/class/infiniband/mlx4_0/ports/1/counters/port_rcv_data:7\n")  # fmt: skip
    assert reading.saturated == ["mlx4_0:1"]


def test_the_command_reads_this_machines_loopback() -> None:
    """The Ethernet command run for real by sh: its output parses to the interface's two counters."""
    text = subprocess.run(
        ["sh", "-c", counter_command(FabricSpec(interface="lo"))], capture_output=True, text=True, check=False
    ).stdout
    reading = parse_counter_output(text)
    assert list(reading.ports) == ["lo"] and reading.error is None


def test_the_rdma_command_names_each_listed_hca_for_perfquery(h100: Inventory) -> None:
    command = counter_command(h100.primary.fabric)
    assert "/sys/class/net/ibp26s0/statistics/tx_bytes" in command
    assert "/sys/class/infiniband/*/ports/*/counters/port_xmit_data" in command
    assert re.findall(r"perfquery -x -C (\S+) ", command)[:2] == ["mlx5_0", "mlx5_1"]
    assert "perfquery -x -C mlx5_0 -P 1" in counter_command(FabricSpec(kind="roce", hca=["mlx5_0:1"]))
    assert "infiniband" not in counter_command(ETHERNET)


def test_expected_bytes_are_the_allreduce_lower_bound() -> None:
    assert expected_bytes_per_node(500, 2) == 500  # 2(N-1)/N = 1
    assert expected_bytes_per_node(500, 4) == 750  # 1.5
    assert expected_bytes_per_node(500, 1) == 0


def _expect(g: int, nodes: int = 2) -> CounterExpectation:
    """The expectation of ``nodes`` nodes all-reducing ``g`` bytes per rank."""
    expectation = counter_expectation(Volume(bytes=g, derivation=f"{g} B"), nodes)
    assert expectation is not None
    return expectation


def test_the_floors_are_g_per_node_and_the_ring_tree_bound_on_average() -> None:
    # Every node: 90% of G, whatever the algorithm (a tree's root moves about G).
    assert _expect(1000, 2).floor_bytes_per_node == 900
    assert _expect(1000, 4).floor_bytes_per_node == 900
    # The mean over nodes: 90% of 2(N-1)/N x G; with in-network reduction across nodes, 90% of G.
    assert _expect(1000, 2).mean_floor(in_network=False) == 900
    assert _expect(1000, 4).mean_floor(in_network=False) == 1350
    assert _expect(1000, 2).mean_floor(in_network=True) == 900
    assert _expect(1000, 4).mean_floor(in_network=True) == 900
    one = _expect(1000, 1)
    assert one.expected_bytes_per_node == one.floor_bytes_per_node == one.mean_floor(in_network=False) == 0
    assert counter_expectation(None, 4) is None
    assert TIMING_TOLERANCE == 0.10


def test_the_expectation_says_both_floors() -> None:
    words = _expect(2 * GB, 4).words()
    assert "each node's fabric must carry >= 1.80 GB each way" in words
    assert "the nodes' mean >= 2.70 GB (1.80 GB if the log shows in-network reduction across nodes)" in words


def _pattern(g: int, shares: dict[str, float]) -> tuple[dict[str, NodeCounters], dict[str, NodeCounters]]:
    """Readings of nodes that moved ``share x g`` bytes each way."""
    before = {n: _eth(0, 0) for n in shares}
    return before, {n: _eth(int(f * g), int(f * g)) for n, f in shares.items()}


def test_a_ring_moves_the_bound_through_every_node() -> None:
    g = 4 * GB
    ring = prove_counters(
        *_pattern(g, dict.fromkeys("abcd", 1.5)), fabric=ETHERNET, expectation=_expect(g, 4)
    )
    assert ring.valid and ring.floor_bytes_per_node == int(0.9 * g)
    assert ring.mean_floor_bytes_per_node == int(0.9 * 1.5 * g)


def test_a_double_binary_tree_at_4_nodes_is_not_short() -> None:
    """NCCL's double binary tree at 4 nodes: the two trees' roots move about G each way, the two nodes
    interior in one tree about 2G; the mean is 2(N-1)/N x G = 1.5 G. The roots are under the 1.35 G the
    mean floor would ask of them (the false fabric-counters-short of before), over G's 90%."""
    g = 4 * GB
    tree = {"a": 1.0, "b": 2.0, "c": 2.0, "d": 1.0}
    proof = prove_counters(*_pattern(g, tree), fabric=ETHERNET, expectation=_expect(g, 4))
    assert proof.valid, proof.reason
    assert counter_findings(proof) == []
    # A root that moved less than G is short, named alone, against the per-node floor.
    low = prove_counters(*_pattern(g, tree | {"d": 0.5}), fabric=ETHERNET, expectation=_expect(g, 4))
    assert not low.valid and "d 2.00 GB against a floor of 3.60 GB per node" in (low.reason or "")
    assert "a 4.00 GB" not in (low.reason or "")
    # Every node above G, the mean below the bound: short on average.
    flat = prove_counters(
        *_pattern(g, dict.fromkeys("abcd", 1.1)), fabric=ETHERNET, expectation=_expect(g, 4)
    )
    assert not flat.valid and "on average" in (flat.reason or "")
    assert "90% of the ring/tree bound" in (flat.reason or "")


def test_the_mean_is_judged_only_when_every_node_was_read() -> None:
    """The two roots read, the two interior nodes not: the roots' mean (G) says nothing of the run's."""
    g = 4 * GB
    before, after = _pattern(g, {"a": 1.0, "b": 2.0, "c": 2.0, "d": 1.0})
    before |= {"b": NodeCounters(error="b: unreachable"), "c": NodeCounters(error="c: unreachable")}
    proof = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(g, 4))
    assert proof.valid
    assert [f.code for f in counter_findings(proof)] == ["fabric-counters-unread"] * 2


def test_a_fabric_that_carried_60_percent_of_the_ring_volume_is_invalid() -> None:
    """The acceptance case: no in-network reduction in the log, 60% of 2(N-1)/N x G: invalid (the
    half-volume floor of before called it valid); the same bytes under SHARP's bound at 4 nodes pass."""
    g = 2 * GB  # 4 nodes: 2(N-1)/N x G = 3 GB
    before, after = _pattern(g, dict.fromkeys("abcd", 0.9))  # 60% of 1.5 G
    ring = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(g, 4))
    assert (
        not ring.valid and ring.bound == "ring/tree" and ring.mean_floor_bytes_per_node == int(0.9 * 3 * GB)
    )
    assert "90% of the ring/tree bound" in (ring.reason or "")
    assert [f.code for f in counter_findings(ring)] == ["fabric-counters-short"]
    sharp = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(g, 4), in_network=True)
    assert sharp.valid and sharp.bound == "in-network"  # G = 2 GB, floor 1.8 GB, carried 1.8 GB


def test_resnet50_gradients_are_float32_unless_horovod_compresses_them(h100: Inventory) -> None:
    workload = get_workload("resnet50")
    settings = h100.run
    assert workload.gradient_bytes(settings.model_copy(update={"precision": "fp16"})) == 25_557_032 * 4
    half = settings.model_copy(update={"framework": "horovod", "fp16_allreduce": True})
    assert workload.gradient_bytes(half) == 25_557_032 * 2
    ddp = settings.model_copy(update={"framework": "ddp", "fp16_allreduce": True})
    assert workload.gradient_bytes(ddp) == 25_557_032 * 4
    assert get_workload("nccl-tests").gradient_bytes(settings) is None


def _eth(tx: int, rx: int) -> NodeCounters:
    return NodeCounters(ports={"eth0": PortBytes(tx=tx, rx=rx)})


def test_a_fabric_that_carried_the_gradients_is_valid() -> None:
    before = {"a": _eth(10, 20), "b": _eth(5, 5)}
    after = {"a": _eth(10 + 2 * GB, 20 + 2 * GB), "b": _eth(5 + 2 * GB, 5 + 2 * GB)}
    proof = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(2 * GB))
    assert proof.valid and proof.reason is None
    assert proof.nodes["a"].sent == 2 * GB and proof.nodes["b"].received == 2 * GB
    assert proof.bytes_per_node == 2 * GB
    assert counter_findings(proof) == []


def test_a_node_whose_fabric_carried_far_less_makes_the_run_invalid() -> None:
    before = {"a": _eth(0, 0), "b": _eth(0, 0)}
    after = {"a": _eth(2 * GB, 2 * GB), "b": _eth(2 * GB, GB // 10)}
    proof = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(2 * GB))
    assert not proof.valid
    assert proof.reason and "b 0.10 GB" in proof.reason and "a 2.00 GB" not in proof.reason
    [finding] = counter_findings(proof)
    assert finding.code == "fabric-counters-short" and finding.severity == "error"
    # One node has no other node to exchange with: nothing is judged.
    alone = prove_counters({"a": _eth(0, 0)}, {"a": _eth(1, 1)}, fabric=ETHERNET, expectation=_expect(GB, 1))
    assert alone.valid


def _shifted(text: str, by: dict[str, int]) -> str:
    """The sysfs lines of ``text`` with ``by[device]`` words added to each of that device's counters."""
    out = []
    for line in text.splitlines():
        path, _, value = line.rpartition(":")
        device = path.split("/")[4] if path.startswith("/sys/") else ""
        out.append(f"{path}:{int(value) + by.get(device, 0)}" if device else line)
    return "\n".join(out) + "\n"


def test_a_rail_that_carried_nothing_is_named(h100: Inventory) -> None:
    text = fixture_text(SYSFS)
    rails = [d for d in h100.primary.fabric.hca or [] if d != "mlx5_7"]
    after_text = _shifted(text, dict.fromkeys(rails, GB // 4) | {"mlx5_bond_0": GB})
    before, after = parse_counter_output(text), parse_counter_output(after_text)
    proof = prove_counters(
        {"n1": before, "n2": before}, {"n1": after, "n2": after},
        fabric=h100.primary.fabric, expectation=_expect(GB),
    )  # fmt: skip
    assert proof.valid  # 7 rails x 1 GB is more than the 1 GB expected
    assert proof.idle_rails == {"n1": ["mlx5_7:1"], "n2": ["mlx5_7:1"]}
    assert set(proof.nodes["n1"].rails) == {f"{d}:1" for d in h100.primary.fabric.hca or []}
    assert set(proof.nodes["n1"].other) == {"mlx5_bond_0:1"}  # read, not the declared fabric
    assert proof.rail_balance == 0.0
    assert {f.code for f in counter_findings(proof)} == {"fabric-rail-idle"}


def test_counters_that_went_backwards_or_were_not_read_are_unknown_not_guessed() -> None:
    before = {"a": _eth(100, 100), "b": NodeCounters(error="b: unreachable")}
    after = {"a": _eth(50, 200), "b": _eth(1, 1)}
    proof = prove_counters(before, after, fabric=ETHERNET, expectation=_expect(GB))
    assert proof.valid  # unknown is not short
    assert "backwards" in (proof.nodes["a"].error or "") and proof.nodes["b"].error == "b: unreachable"
    assert [f.code for f in counter_findings(proof)] == ["fabric-counters-unread"] * 2
    assert proof.bytes_per_node is None


def test_judge_run_marks_a_run_whose_fabric_stayed_quiet_invalid(h100: Inventory) -> None:
    plan = plan_run(h100, "resnet50", nodes=2, steps=10, warmup_steps=2)
    ports = {f"{d}:1": PortBytes(tx=0, rx=0) for d in h100.primary.fabric.hca or []}
    quiet = {n.name: NodeCounters(ports=ports) for n in h100.nodes[:2]}
    record = judge_run(
        h100, plan, get_workload("resnet50"), "", 0, run_id="r", started_at=datetime.now(UTC),
        counters=(quiet, quiet),
    )  # fmt: skip
    assert record.counters is not None
    assert record.counters.expected_bytes_per_node == 25_557_032 * 4 * 12  # 2 nodes: 2(N-1)/N = 1
    assert not record.counters.valid and not record.valid
    assert "fabric-counters-short" in {f.code for f in record.findings}
    # Read back from result.json: the proof survives the round trip.
    assert type(record).model_validate_json(record.model_dump_json()).counters == record.counters


class _Counters:
    """A reader that hands out successive readings, each node's counters grown by ``step`` bytes."""

    def __init__(self, step: int):
        self.step, self.total = step, 0
        self.calls: list[list[str]] = []

    def __call__(self, inventory: Inventory, nodes: Sequence[Node]) -> dict[str, NodeCounters]:
        self.calls.append([n.name for n in nodes])
        reading = {n.name: _eth(self.total, self.total) for n in nodes}
        self.total += self.step
        return reading


def test_the_ssh_launcher_reads_the_counters_around_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    plan = plan_run(inventory, "resnet50", nodes=2)
    reader = _Counters(step=5 * GB)
    monkeypatch.setattr(SshLaunch, "follow", lambda self, on_line, deadline: 0)  # mpirun exits 0 at once
    launcher = SshBackend(read_counters=reader, take_snapshot=lambda inventory, nodes: {})
    done = run_plans(
        run_context(inventory, [plan], launcher=launcher, repeats=2, timeout_s=10, runs_dir=tmp_path)
    )
    assert reader.calls == [["node1", "node2"]] * 4  # before and after each of the 2 runs
    for record, directory in done:
        assert isinstance(record.counters, CounterProof)
        assert record.counters.nodes["node2"].sent == 5 * GB
        assert '"counters"' in (directory / "result.json").read_text()


def test_a_reset_on_a_port_outside_the_fabric_is_left_out_not_fatal() -> None:
    before = NodeCounters(ports={"eth0": PortBytes(tx=0, rx=0), "eth1": PortBytes(tx=9, rx=9)})
    after = NodeCounters(ports={"eth0": PortBytes(tx=GB, rx=GB), "eth1": PortBytes(tx=1, rx=1)})
    proof = prove_counters({"a": before, "b": before}, {"a": after, "b": after}, fabric=ETHERNET,
                           expectation=_expect(GB))  # fmt: skip
    assert proof.valid and proof.nodes["a"].sent == GB and proof.nodes["a"].other == {}


def test_an_unreachable_node_gets_a_reading_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SSH for real: nothing listens on the port, so the node's reading says why, and the proof
    calls its traffic unknown instead of short."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    document = {
        "cluster": {"name": "gone", "defaults": {"ssh": {"port": port, "connect_timeout_s": 2}}},
        "nodes": [{"name": "n1", "address": "127.0.0.1", "role": "primary"}],
    }
    inventory = validate_document(document, tmp_path / "inv.yml")
    [(name, reading)] = read_fabric_counters(inventory, inventory.nodes).items()
    assert name == "n1" and reading.ports == {} and reading.error and "unreachable" in reading.error
    proof = prove_counters({"n1": reading}, {"n1": reading}, fabric=ETHERNET, expectation=_expect(GB))
    assert proof.valid and proof.nodes["n1"].error == reading.error


def test_the_ipoib_netdev_of_a_port_is_read_from_sysfs() -> None:
    """ib0's HCA and port from its sysfs files (dev_port 0: port 1), and the port's link layer."""
    reading = parse_counter_output(fixture_text(IPOIB_MAP))
    assert reading.netdev_ports == {"ib0": "mlx4_0:1"}
    assert reading.link_layers == {"mlx4_0:1": "InfiniBand"}
    assert reading.ipoib("mlx4_0:1") == ["ib0"] and reading.unparsed_lines == []
    # A RoCE port's netdev is Ethernet: nothing of it is in the RoCE data counters, nothing taken out.
    roce = reading.model_copy(update={"link_layers": {"mlx4_0:1": "Ethernet"}})
    assert roce.ipoib("mlx4_0:1") == []


def test_the_command_reads_every_hca_netdev_and_link_layer() -> None:
    command = counter_command(IB)
    assert "device/infiniband_verbs/*/ibdev" in command and "/link_layer" in command
    assert '"$n/dev_port" "$n/dev_id"' in command


def _ib(port_bytes: int, ipoib_bytes: int) -> NodeCounters:
    """A reading of one InfiniBand port and its IPoIB netdev, mapped as the real capture maps them."""
    mapped = parse_counter_output(fixture_text(IPOIB_MAP))
    return mapped.model_copy(
        update={
            "ports": {
                "mlx4_0:1": PortBytes(tx=port_bytes, rx=port_bytes),
                "ib0": PortBytes(tx=ipoib_bytes, rx=ipoib_bytes),
            }
        }
    )


def test_a_port_filled_by_ipoib_is_invalid_and_named_and_near_zero_ipoib_is_valid() -> None:
    """The acceptance case: the HCA port moved the expected bytes and its IPoIB netdev nearly as many
    (NCCL fell back to TCP over ib0): invalid, named IPoIB; the same port with IPoIB near zero: valid."""
    expected = 2 * GB
    before = {"a": _ib(0, 0), "b": _ib(0, 0)}
    sockets = {"a": _ib(expected + GB // 10, expected), "b": _ib(expected + GB // 10, expected)}
    proof = prove_counters(before, sockets, fabric=IB, expectation=_expect(expected), rdma_only=True)
    assert not proof.valid and proof.over_ipoib
    assert proof.nodes["a"].sent == expected + GB // 10  # the port's own count, shown...
    assert proof.nodes["a"].ipoib_sent == expected and proof.nodes["a"].rdma_sent == GB // 10  # ...and split
    assert (proof.reason or "").startswith("traffic went over IPoIB sockets, not RDMA")
    [finding] = counter_findings(proof)
    assert finding.code == "fabric-over-ipoib" and "/dev/infiniband" in (finding.advice or "")

    verbs = {"a": _ib(expected, 3000), "b": _ib(expected, 3000)}  # IPoIB near zero (ARP, SSH)
    fine = prove_counters(before, verbs, fabric=IB, expectation=_expect(expected), rdma_only=True)
    assert fine.valid and fine.nodes["b"].rdma_received == expected - 3000
    # A CPU run's Gloo/MPI go over IPoIB by design: judged on the port's total, valid.
    cpu = prove_counters(before, sockets, fabric=IB, expectation=_expect(expected))
    assert cpu.valid and not cpu.over_ipoib


def test_judge_run_reads_the_in_network_bound_from_the_log(h100: Inventory) -> None:
    """A 4-node GPU run whose fabric carried 95% of G per node: short of the ring/tree bound without
    in-network reduction in the log; valid when the log (a real one: the SHARP collnet plugin loaded
    over /SHARP HCAs, no TUNING lines) shows in-network reduction."""
    second = h100.secondaries[0]
    extra = [second.model_copy(update={"name": f"gpu-node-{i}", "address": f"10.0.0.{i}"}) for i in (3, 4)]
    four = h100.model_copy(update={"nodes": [*h100.nodes, *extra]})
    plan = plan_run(four, "resnet50", nodes=4, steps=10, warmup_steps=2)
    gradient = 25_557_032 * 4 * 12
    ports = {f"{d}:1": PortBytes(tx=0, rx=0) for d in h100.primary.fabric.hca or []}
    zero = {n.name: NodeCounters(ports=ports) for n in four.nodes}
    share = int(0.95 * gradient) // len(ports)
    moved = {
        n.name: NodeCounters(ports={p: PortBytes(tx=share, rx=share) for p in ports}) for n in four.nodes
    }

    def judged(log: str) -> RunRecord:
        return judge_run(
            four, plan, get_workload("resnet50"), log, 0, run_id="r", started_at=datetime.now(UTC),
            counters=(zero, moved),
        )  # fmt: skip

    sharp = judged(fixture_text("nccl_logs/nccl-issue1357-h100-4x-ib-sharp-ibext-rdma-plugin-v6-partial.txt"))
    assert sharp.fabric.in_network and sharp.counters is not None
    assert sharp.counters.bound == "in-network" and sharp.counters.rdma_only and sharp.counters.valid
    ring = judged(
        fixture_text("nccl_logs/nccl-issue1453-h100-numeric-tuning-tree-ll-ll128-glued-partial.txt")
    )
    assert not ring.fabric.in_network and ring.fabric.algorithms == {"TREE/LL": 3, "TREE/LL128": 3}
    assert ring.counters is not None and ring.counters.bound == "ring/tree" and not ring.counters.valid


def test_only_reduction_across_nodes_is_in_network_reduction() -> None:
    """CollNet reduces in the network between nodes; NVLS reduces in a node's NVSwitch, and counts only
    where a collnet plugin carries it across nodes (NCCL runs multi-node NVLS over CollNet)."""
    assert in_network_reduction(NcclLog(algorithms={"COLLNET_DIRECT/SIMPLE": 1}))
    assert in_network_reduction(NcclLog(algorithms={"COLLNET_CHAIN/SIMPLE": 1, "RING/LL": 2}))
    assert not in_network_reduction(NcclLog(algorithms={"RING/LL": 2, "NVLS/SIMPLE": 1}))
    assert not in_network_reduction(NcclLog(algorithms={"NVLS_TREE/SIMPLE": 4, "RING/SIMPLE": 1}))
    assert in_network_reduction(NcclLog(algorithms={"NVLS/SIMPLE": 1}, collnet_plugin="SHARP"))
    # TUNING lines say what ran: SHARP listed on the HCAs does not override them.
    sharp = parse_nccl_log(
        fixture_text("nccl_logs/nccl-issue1357-h100-4x-ib-sharp-ibext-rdma-plugin-v6-partial.txt")
    )
    assert in_network_reduction(sharp)
    assert not in_network_reduction(sharp.model_copy(update={"algorithms": {"RING/SIMPLE": 3}}))
