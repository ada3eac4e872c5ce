"""Values that land in a file line (hosts, known_hosts, ssh config) or an argv stay one line, one value.

Names and addresses are drawn from valid ones and hostile ones (zone ids, separators, line breaks,
look-alike and invisible characters). Whatever validates must produce exactly the lines and the
``mpirun -H`` list it should: one hosts line and one known_hosts entry per node, one host per ``-H``
entry; whatever does not validate is refused with InventoryError.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterctl.errors import InventoryError
from clusterctl.hosts.sshkeys import append_known_hosts, known_hosts_line
from clusterctl.inventory import Inventory, validate_document
from clusterctl.provision.plan import step_context
from clusterctl.run.launchers.mpirun import Mpirun
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from tests.helpers.hostile import BASE, reproducible

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7bB0Xl0lOuRbYzq6Uq5M5V1w8x8b2L3Jm6c0Wm0R1d"
HOSTILE_CHARS = "\n\r\t ,:%#[]*?!;|&$`'\"\\/=@\x00\x0b\x0c\x85\u2028\u200b\u202e\ufeffаеоі０"  # noqa: RUF001
EXAMPLES = 400

hostile_text = st.text(alphabet=st.sampled_from("abc019.-" + HOSTILE_CHARS), min_size=1, max_size=24)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
zone_id = st.tuples(ipv6, hostile_text).map(lambda parts: f"{parts[0]}%{parts[1]}")
hostname = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9](\.[a-z0-9]{1,8}){0,2}", fullmatch=True)
# Forms inet_aton reads as IPv4 besides the dotted quad: octal and hex parts, short forms, one integer.
odd_ipv4 = st.one_of(
    st.integers(0, 2**32 - 1).map(str),
    st.integers(0, 255).map(lambda octet: f"0{octet:o}.0.0.2"),
    st.integers(0, 255).map(lambda octet: f"0x{octet:x}.0.0.1"),
    st.tuples(st.integers(0, 255), st.integers(0, 2**24 - 1)).map(lambda p: f"{p[0]}.{p[1]}"),
    ipv4.map(lambda ip: ip.rsplit(".", 1)[0] + ".0" + ip.rsplit(".", 1)[1]),
)
address = st.one_of(
    ipv4, hostname, ipv6, zone_id, hostile_text, odd_ipv4, st.tuples(ipv4, hostile_text).map("".join)
)
node_name = st.one_of(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), hostile_text)


def _document(names: list[str], addresses: list[str]) -> dict[str, Any]:
    document = YAML(typ="safe").load(BASE)
    document["nodes"] = [
        {"name": name, "address": addr, "role": "primary" if i == 0 else "secondary",
         "fabric": {"address": f"192.168.11.{i + 1}/24"}}
        for i, (name, addr) in enumerate(zip(names, addresses, strict=True))
    ]  # fmt: skip
    return document


def _is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _reads_as_ipv4(value: str) -> bool:
    try:
        socket.inet_aton(value)
    except OSError:
        return False
    return True


def _node_names(inventory: Inventory) -> set[str]:
    return {value for n in inventory.nodes for value in (n.name, n.address, n.fabric_ip)}


def _assert_file_lines_are_single_values(inventory: Inventory) -> None:
    cluster = step_context(inventory, {n.name: HOST_KEY for n in inventory.nodes})["cluster"]
    allowed = _node_names(inventory)
    # Only address lines: a node known by a DNS name and without a fabric address gets none.
    with_ip = [n for n in inventory.nodes if _is_ipv4(n.fabric_ip)]
    assert len(cluster["hosts_lines"]) == len(with_ip)
    for line, node in zip(cluster["hosts_lines"], with_ip, strict=True):
        ip, name = line.split(" ")
        assert (ipaddress.IPv4Address(ip), name) == (ipaddress.IPv4Address(node.fabric_ip), node.name)
    assert len(cluster["known_hosts_lines"]) == len(inventory.nodes)
    for line in cluster["known_hosts_lines"]:
        hosts, key_type, key = line.split(" ")
        assert set(hosts.split(",")) <= allowed and f"{key_type} {key}" == HOST_KEY
    host_line, identity, only, end = cluster["ssh_config"].split("\n")
    assert set(host_line.split()[1:]) == allowed and host_line.split()[0] == "Host"
    assert identity.split()[0] == "IdentityFile" and only.split() == ["IdentitiesOnly", "yes"] and end == ""


def _assert_mpirun_hosts_are_one_per_node(inventory: Inventory) -> None:
    # tf_cnn_benchmarks: the workload the paper image (this inventory's profile) runs.
    workload = "tf_cnn_benchmarks"
    plan = build_job(inventory, run_options(inventory, workload), get_workload(workload))
    argv = Mpirun().command(inventory, plan)
    hosts = argv[argv.index("-H") + 1].split(",")
    assert len(hosts) == len(inventory.nodes)
    for entry, node in zip(hosts, inventory.nodes, strict=True):
        host, slots = entry.split(":")
        assert host == node.fabric_ip and int(slots) == node.ranks
    assert not any(c in arg for arg in argv for c in "\n\r\x00")


@reproducible(EXAMPLES)
@given(st.lists(st.tuples(node_name, address), min_size=1, max_size=4))
def test_whatever_validates_writes_one_value_per_line_and_per_host(
    tmp_path: Path, nodes: list[tuple[str, str]]
) -> None:
    names, addresses = [n for n, _ in nodes], [a for _, a in nodes]
    try:
        inventory = validate_document(_document(names, addresses), tmp_path / "inv.yml")
    except InventoryError as refused:
        assert "\n\n" not in str(refused) and "Fix: " in str(refused)
        event("refused")
        return
    event("valid")
    for value in [*names, *addresses]:
        assert value.isascii() and value.isprintable() and not set(value) & set(" ,%#[]*?!;|&$`'\"\\")
    for value in addresses:  # what ssh reads as IPv4 is the dotted quad it looks like
        assert _is_ipv4(value) or not _reads_as_ipv4(value), value
    assert len({a.lower() for a in addresses}) == len(addresses)
    _assert_file_lines_are_single_values(inventory)
    _assert_mpirun_hosts_are_one_per_node(inventory)


@pytest.mark.parametrize("name", ["a b", "a,b", "a\nb", "", "a#b", "[a]:22"])
def test_known_hosts_line_refuses_a_name_that_would_add_a_host_or_a_line(name: str) -> None:
    with pytest.raises(ValueError, match="known_hosts"):
        known_hosts_line(["node1", name], 22, HOST_KEY)


def test_known_hosts_is_deduplicated_by_whole_entries(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    line = known_hosts_line(["node1", "10.0.0.1"], 50000, HOST_KEY)
    assert append_known_hosts(path, [line]) == [line]
    same_entry = "[10.0.0.1]:50000,[node1]:50000   " + HOST_KEY + " a-comment"
    assert append_known_hosts(path, [line, same_entry]) == []
    assert path.read_text().splitlines() == [line]
    other = known_hosts_line(["node2"], 50000, HOST_KEY)
    assert append_known_hosts(path, [other, other]) == [other]
    assert path.read_text().splitlines() == [line, other]


def test_known_hosts_refuses_an_entry_spanning_lines(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    with pytest.raises(ValueError, match="not one known_hosts entry"):
        append_known_hosts(path, [f"node1 {HOST_KEY}\n* {HOST_KEY}"])
    assert not path.exists()
