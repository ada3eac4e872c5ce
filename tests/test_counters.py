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

from clusterctl.diagnostics.parsers.fabric_counters import (
    NodeCounters,
    PortBytes,
    counter_command,
    parse_counter_output,
)
from clusterctl.inventory import FabricSpec, Inventory, Node, load_inventory, validate_document
from clusterctl.launch import plan_run
from clusterctl.paths import data_dir
from clusterctl.results.counter_reading import read_fabric_counters
from clusterctl.results.counters import (
    CounterProof,
    counter_findings,
    expected_bytes_per_node,
    prove_counters,
)
from clusterctl.results.record import judge_run
from clusterctl.runner import ExecResult, run_benchmark
from clusterctl.workloads import get_workload
from tests.fixtures import fixture_text

H100 = data_dir("inventories") / "modern-h100.yml"
NET = "net_statistics/eth0-and-missing-interface-grep.txt"
SYSFS = "sysfs_counters/gpud-h100-8ib-bond-port-data-grep.txt"
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
    assert expected_bytes_per_node(100, 5, 2) == 500  # 2(N-1)/N = 1
    assert expected_bytes_per_node(100, 5, 4) == 750  # 1.5
    assert expected_bytes_per_node(100, 5, 1) == 0


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
    proof = prove_counters(before, after, fabric=ETHERNET, expected_bytes_per_node=2 * GB)
    assert proof.valid and proof.reason is None
    assert proof.nodes["a"].sent == 2 * GB and proof.nodes["b"].received == 2 * GB
    assert proof.bytes_per_node == 2 * GB
    assert counter_findings(proof) == []


def test_a_node_whose_fabric_carried_far_less_makes_the_run_invalid() -> None:
    before = {"a": _eth(0, 0), "b": _eth(0, 0)}
    after = {"a": _eth(2 * GB, 2 * GB), "b": _eth(2 * GB, GB // 10)}
    proof = prove_counters(before, after, fabric=ETHERNET, expected_bytes_per_node=2 * GB)
    assert not proof.valid
    assert proof.reason and "b 0.10 GB" in proof.reason and "a " not in proof.reason
    [finding] = counter_findings(proof)
    assert finding.code == "fabric-counters-short" and finding.severity == "error"
    # One node has no other node to exchange with: nothing is judged.
    alone = prove_counters({"a": _eth(0, 0)}, {"a": _eth(1, 1)}, fabric=ETHERNET, expected_bytes_per_node=0)
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
        fabric=h100.primary.fabric, expected_bytes_per_node=GB,
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
    proof = prove_counters(before, after, fabric=ETHERNET, expected_bytes_per_node=GB)
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


def _ok_exec(inventory: Inventory, plan, *, timeout_s: float, on_line) -> ExecResult:
    return ExecResult(0, "")


def test_run_benchmark_reads_the_counters_around_every_run(tmp_path: Path) -> None:
    inventory = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    plan = plan_run(inventory, "resnet50", nodes=2)
    reader = _Counters(step=5 * GB)
    done = run_benchmark(
        inventory, plan, get_workload("resnet50"), repeats=2, timeout_s=10, runs_dir=tmp_path,
        on_line=lambda line: None, execute=_ok_exec, read_counters=reader,
    )  # fmt: skip
    assert reader.calls == [["node1", "node2"]] * 4  # before and after each of the 2 runs
    for record, directory in done:
        assert isinstance(record.counters, CounterProof)
        assert record.counters.nodes["node2"].sent == 5 * GB
        assert '"counters"' in (directory / "result.json").read_text()


def test_a_reset_on_a_port_outside_the_fabric_is_left_out_not_fatal() -> None:
    before = NodeCounters(ports={"eth0": PortBytes(tx=0, rx=0), "eth1": PortBytes(tx=9, rx=9)})
    after = NodeCounters(ports={"eth0": PortBytes(tx=GB, rx=GB), "eth1": PortBytes(tx=1, rx=1)})
    proof = prove_counters({"a": before, "b": before}, {"a": after, "b": after}, fabric=ETHERNET,
                           expected_bytes_per_node=GB)  # fmt: skip
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
    proof = prove_counters({"n1": reading}, {"n1": reading}, fabric=ETHERNET, expected_bytes_per_node=GB)
    assert proof.valid and proof.nodes["n1"].error == reading.error
