"""The sandbox's pure parts: the plan, the generated inventory, the state file, bad input (no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.errors import InputError
from clusterctl.inventory import load_inventory, parse_cpu_list
from clusterctl.sandbox.cluster import NodeStatus, SandboxStatus
from clusterctl.sandbox.inventory import inventory_document, write_inventory
from clusterctl.sandbox.nodeimage import render_context
from clusterctl.sandbox.nodes import record_host_keys
from clusterctl.sandbox.plan import LABEL, format_cpu_list, plan_cpus, plan_sandbox
from clusterctl.sandbox.state import SandboxFiles, SandboxState, read_state, sandbox_files, write_state


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path))
    return tmp_path


def test_plan_names_addresses_and_labels() -> None:
    plan = plan_sandbox("dev", 3, "10.9.0.0/24")
    assert plan.network == "clusterctl-dev"
    assert [n.name for n in plan.nodes] == ["node1", "node2", "node3"]
    assert [n.address for n in plan.nodes] == ["10.9.0.11", "10.9.0.12", "10.9.0.13"]
    assert plan.nodes[0].container == "clusterctl-dev-node1"
    assert plan.nodes[2].volume == "clusterctl-dev-node3-docker"
    assert plan.labels == {LABEL: "dev"}


@pytest.mark.parametrize(
    ("name", "nodes", "subnet", "fragment"),
    [
        ("dev", 0, "10.9.0.0/24", "--nodes 0"),
        ("dev", 33, "10.9.0.0/24", "--nodes 33"),
        ("Dev_1", 2, "10.9.0.0/24", "--name 'Dev_1'"),
        ("dev", 2, "10.9.0.1/24", "--subnet '10.9.0.1/24'"),
        ("dev", 8, "10.9.0.0/28", "beyond this network"),
    ],
)
def test_plan_refuses_bad_input(name: str, nodes: int, subnet: str, fragment: str) -> None:
    with pytest.raises(InputError, match="Fix") as info:
        plan_sandbox(name, nodes, subnet)
    assert fragment in str(info.value)


def test_cli_nodes_zero_exits_2_and_creates_nothing(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "up", "--nodes", "0"]) == 2
    assert "--nodes 0" in capsys.readouterr().err
    assert list(state.iterdir()) == []


def test_generated_inventory_validates_and_round_trips(state: Path) -> None:
    plan = plan_sandbox("dev", 2, "10.9.0.0/24")
    files = sandbox_files()
    written = write_inventory(plan, files, plan_cpus([0, 1, 2, 3], 2))
    loaded = load_inventory(files.inventory)
    assert loaded.model_dump() == written.model_dump()
    assert loaded.primary.name == "node1"
    node2 = loaded.node("node2")
    assert (node2.address, str(node2.fabric.address), node2.fabric.kind) == (
        "10.9.0.12",
        "10.9.0.12/24",
        "ethernet",
    )
    assert node2.ssh.identity_file == str(files.private_key)
    assert node2.ssh.known_hosts == str(files.known_hosts)
    assert node2.gpus.count == 0
    assert loaded.container.sshd_port == 50000
    assert loaded.image.profile == "cpu"
    assert loaded.run.steps == 10
    assert [n.cpuset for n in loaded.nodes] == ["0-1", "2-3"]


def test_example_inventory_has_the_generated_shape(tmp_path: Path) -> None:
    example = load_inventory(Path(__file__).parents[1] / "inventories" / "sandbox-example.yml")
    generated = inventory_document(
        plan_sandbox("sandbox", 2), plan_cpus([0, 1], 2), SandboxFiles(tmp_path), "~/w"
    )
    assert [n.address for n in example.nodes] == [n["address"] for n in generated["nodes"]]
    assert [n.cpuset for n in example.nodes] == [n["cpuset"] for n in generated["nodes"]]
    assert example.run.model_dump(include=set(generated["run"])) == generated["run"]
    assert example.container.sshd_port == generated["container"]["sshd_port"]
    assert [m.model_dump() for m in example.container.mounts] == generated["container"]["mounts"]


def test_state_file_round_trip(state: Path) -> None:
    files = sandbox_files()
    assert read_state(files) is None
    saved = SandboxState(name="dev", nodes=2, subnet="10.9.0.0/24", node_image="x:1", isolation="privileged")
    write_state(files, saved)
    assert read_state(files) == saved


def test_corrupt_state_file_is_an_input_error(state: Path) -> None:
    files = sandbox_files()
    files.directory.mkdir(parents=True)
    files.state.write_text("{not json")
    with pytest.raises(InputError, match="sandbox down"):
        read_state(files)


def test_record_host_keys_replaces_only_that_nodes_lines(tmp_path: Path) -> None:
    plan = plan_sandbox("dev", 2, "10.9.0.0/24")
    known = tmp_path / "known_hosts"
    node1, node2 = plan.nodes
    assert record_host_keys(known, node1, ["10.9.0.11,node1 ssh-ed25519 OLD"])
    assert record_host_keys(known, node2, ["10.9.0.12,node2 ssh-ed25519 TWO"])
    assert not record_host_keys(known, node2, ["10.9.0.12,node2 ssh-ed25519 TWO"])
    assert record_host_keys(known, node1, ["10.9.0.11,node1 ssh-ed25519 NEW"])
    assert known.read_text().splitlines() == [
        "10.9.0.12,node2 ssh-ed25519 TWO",
        "10.9.0.11,node1 ssh-ed25519 NEW",
    ]


def test_node_image_tag_follows_the_context() -> None:
    a, b = render_context("debian:bookworm-slim"), render_context("debian:trixie-slim")
    assert a.tag == render_context("debian:bookworm-slim").tag
    assert a.tag != b.tag
    assert a.tag.startswith("clusterctl-node:")
    assert b"FROM debian:trixie-slim" in b.files["Dockerfile"]
    assert set(a.files) == {"Dockerfile", "node-entrypoint.sh", "node-sshd.conf"}


def test_missing_engine_exits_2_and_creates_nothing(
    state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{state}/no-engine.sock")
    assert main(["sandbox", "up", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "no Docker engine answers" in err
    assert "no-engine.sock" in err
    assert list(state.iterdir()) == []


@pytest.mark.parametrize(
    ("cores", "nodes"),
    [(c, n) for c in (1, 2, 3, 4, 6, 8, 16, 64) for n in (1, 2, 3, 4, 5, 8, 32) if n <= c],
)
def test_cpu_plan_gives_equal_disjoint_shares(cores: int, nodes: int) -> None:
    allowed = [2 * c + 1 for c in range(cores)]  # not 0..n-1: the engine may be limited to some CPUs
    plan = plan_cpus(allowed, nodes)
    shares = [parse_cpu_list(c) for c in plan.cpusets]
    assert not plan.shared
    assert len(shares) == nodes
    assert {len(s) for s in shares} == {cores // nodes}  # equal, and as large as equal allows
    used = [cpu for share in shares for cpu in share]
    assert len(used) == len(set(used))  # disjoint
    assert set(used) <= set(allowed)


@pytest.mark.parametrize(("cores", "nodes"), [(1, 2), (2, 3), (2, 32), (3, 4)])
def test_cpu_plan_with_more_nodes_than_cores_gives_every_node_every_cpu_and_says_so(
    cores: int, nodes: int
) -> None:
    """No two nodes pinned to one CPU while others have one each: such a pair's collective ran 5-7x
    slower than the rest and `check pairs` called it a slow link (issue 41)."""
    plan = plan_cpus(range(cores), nodes)
    assert plan.shared
    assert [parse_cpu_list(c) for c in plan.cpusets] == [list(range(cores))] * nodes


def test_cpu_plan_for_one_node_is_every_cpu_and_two_nodes_split_it() -> None:
    assert plan_cpus([0, 1], 1).cpusets == ("0-1",)
    assert plan_cpus([0, 1], 2).cpusets == ("0", "1")
    assert plan_cpus([0, 1, 2, 3, 4], 2).cpusets == ("0-1", "2-3")  # CPU 4 left over, unused


def test_cpu_plan_refuses_no_cpus() -> None:
    with pytest.raises(ValueError, match="0 CPU"):
        plan_cpus([], 1)


@pytest.mark.parametrize(
    ("text", "cpus"), [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0-1,4,6-7\n", [0, 1, 4, 6, 7]), ("3,1", [1, 3])]
)
def test_cpu_list_round_trip(text: str, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@pytest.mark.parametrize("text", ["", "a", "1-", "3-1", "0,,1"])
def test_cpu_list_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="CPU list"):
        parse_cpu_list(text)


@pytest.mark.parametrize(
    ("cpus", "shared"),
    [
        (["0", "1"], False),
        (["0-1", "2-3"], False),
        (["0", "1", "0"], True),
        (["0-1", "1-2"], True),
        (["", ""], True),
        ([""], False),
    ],
)
def test_status_says_when_nodes_share_cpus(cpus: list[str], shared: bool) -> None:
    nodes = [NodeStatus(f"node{i}", f"c{i}", f"10.9.0.{i}", "running", True, c) for i, c in enumerate(cpus)]
    assert SandboxStatus(name="dev", state="up", nodes=nodes).shared_cpus is shared
