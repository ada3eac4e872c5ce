"""The inventory model: valid examples load; each invalid one exits 2 naming file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.errors import InventoryError
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir
from tests.helpers.inventories import BASE
from tests.helpers.strictjson import strict_loads

# (case id, text replaced in BASE, replacement, field named in the message, text whose line is named)
INVALID = [
    ("unknown-top-key", "container:\n", "containers:\n  x: 1\ncontainer:\n", "containers", "containers:"),
    (
        "unknown-node-key",
        "    role: primary\n",
        "    role: primary\n    rank: 3\n",
        "nodes[0].rank",
        "rank: 3",
    ),
    (
        "unknown-defaults-key",
        "      rate_gbps: 100\n",
        "      rate_gbps: 100\n      mtu: 4096\n",
        "cluster.defaults.fabric.mtu",
        "mtu: 4096",
    ),
    (
        "duplicate-name",
        "  - name: node2\n",
        "  - name: node1\n",
        "nodes[1].name",
        "  - name: node1\n    address: 10.0.0.2",
    ),
    (
        "duplicate-address",
        "    address: 10.0.0.2\n",
        "    address: 10.0.0.1\n",
        "nodes[1].address",
        "    address: 10.0.0.1\n    fabric:\n      address: 192.168.11.2",
    ),
    ("no-primary", "    role: primary\n", "    role: secondary\n", "nodes", "nodes:"),
    (
        "two-primaries",
        "    address: 10.0.0.2\n",
        "    address: 10.0.0.2\n    role: primary\n",
        "nodes[1].role",
        "    role: primary\n    fabric:\n      address: 192.168.11.2",
    ),
    ("bad-role", "    role: primary\n", "    role: master\n", "nodes[0].role", "role: master"),
    (
        "fabric-other-subnet",
        "      address: 192.168.11.2/24\n",
        "      address: 192.168.12.2/24\n",
        "nodes[1].fabric.address",
        "192.168.12.2/24",
    ),
    (
        "fabric-duplicate-ip",
        "      address: 192.168.11.2/24\n",
        "      address: 192.168.11.1/24\n",
        "nodes[1].fabric.address",
        "      address: 192.168.11.1/24\ncontainer",
    ),
    (
        "fabric-not-cidr",
        "      address: 192.168.11.2/24\n",
        "      address: not-an-ip\n",
        "nodes[1].fabric.address",
        "not-an-ip",
    ),
    (
        "rdma-without-address",
        "    fabric:\n      address: 192.168.11.2/24\n",
        "",
        "nodes[1]",
        "  - name: node2",
    ),
    (
        "slots-over-gpus",
        "    role: primary\n",
        "    role: primary\n    slots: 8\n",
        "nodes[0].slots",
        "slots: 8",
    ),
    (
        "port-too-high",
        "  sshd_port: 50000\n",
        "  sshd_port: 70000\n",
        "container.sshd_port",
        "sshd_port: 70000",
    ),
    ("port-zero", "  sshd_port: 50000\n", "  sshd_port: 0\n", "container.sshd_port", "sshd_port: 0"),
    (
        "ssh-port-text",
        "    role: primary\n",
        "    role: primary\n    ssh:\n      port: twenty-two\n",
        "nodes[0].ssh.port",
        "port: twenty-two",
    ),
    ("hostile-name", "  - name: node2\n", '  - name: "a;rm -rf /"\n', "nodes[1].name", "rm -rf"),
    ("uppercase-name", "  - name: node2\n", "  - name: Node_2\n", "nodes[1].name", "Node_2"),
    (
        "hostile-address",
        "    address: 10.0.0.2\n",
        '    address: "10.0.0.2 && reboot"\n',
        "nodes[1].address",
        "reboot",
    ),
    (
        "interface-with-space",
        "      interface: ib0\n",
        '      interface: "ib 0"\n',
        "cluster.defaults.fabric.interface",
        '"ib 0"',
    ),
    (
        "interface-too-long",
        "      interface: ib0\n",
        "      interface: averyverylonginterfacename\n",
        "cluster.defaults.fabric.interface",
        "averyverylong",
    ),
    (
        "hca-hostile",
        "      hca: mlx5_0\n",
        '      hca: "mlx5_0$(id)"\n',
        "cluster.defaults.fabric.hca",
        "$(id)",
    ),
    (
        "bad-fabric-kind",
        "      kind: infiniband\n",
        "      kind: omnipath\n",
        "cluster.defaults.fabric.kind",
        "omnipath",
    ),
    ("negative-gpus", "      count: 4\n", "      count: -1\n", "cluster.defaults.gpus.count", "count: -1"),
    (
        "mount-relative-target",
        "      target: /data\n",
        "      target: data\n",
        "container.mounts[0].target",
        "      target: data",
    ),
    (
        "mount-hostile-source",
        "    - source: /srv/data\n",
        '    - source: "/srv/data; curl x|sh"\n',
        "container.mounts[0].source",
        "curl x",
    ),
    (
        "bad-version",
        "  profile: paper-2020\n",
        '  profile: paper-2020\n  versions:\n    mofed: "4.7 3"\n',
        "image.versions.mofed",
        'mofed: "4.7 3"',
    ),
    ("bad-profile", "  profile: paper-2020\n", "  profile: gpu-2025\n", "image.profile", "gpu-2025"),
    (
        "bad-image-ref",
        "  sshd_port: 50000\n",
        "  sshd_port: 50000\n  image: 'Horovod Latest'\n",
        "container.image",
        "Horovod Latest",
    ),
    (
        "bad-capability",
        "  sshd_port: 50000\n",
        "  sshd_port: 50000\n  cap_add: [ipc_lock]\n",
        "container.cap_add[0]",
        "cap_add",
    ),
    ("no-nodes", BASE[BASE.index("nodes:") : BASE.index("container:")], "nodes: []\n", "nodes", "nodes: []"),
    (
        "missing-cluster-name",
        "  name: testcluster\n",
        "  title: testcluster\n",
        "cluster",
        "title: testcluster",
    ),
    (
        "mofed-tarball-missing",
        "  profile: paper-2020\n",
        "  profile: paper-2020\nprovision:\n  mofed_tarball_path: MLNX_OFED_LINUX-absent.tgz\n",
        "provision.mofed_tarball_path",
        "MLNX_OFED_LINUX-absent.tgz",
    ),
    (
        "mofed-tarball-is-a-directory",
        "  profile: paper-2020\n",
        "  profile: paper-2020\nprovision:\n  mofed_tarball_path: .\n",
        "provision.mofed_tarball_path",
        "mofed_tarball_path: .",
    ),
    (
        "cpuset-with-shell",
        "    role: primary\n",
        "    role: primary\n    cpuset: 0-1;reboot\n",
        "nodes[0].cpuset",
        "cpuset: 0-1;reboot",
    ),
    (
        "cpuset-range-backwards",
        "    role: primary\n",
        "    role: primary\n    cpuset: 3-1\n",
        "nodes[0].cpuset",
        "cpuset: 3-1",
    ),
    (
        "preflight-bandwidth-zero",
        "container:\n",
        "preflight:\n  min_bus_bandwidth_gb_s: 0\ncontainer:\n",
        "preflight.min_bus_bandwidth_gb_s",
        "min_bus_bandwidth_gb_s: 0",
    ),
    ("mixed-fabric-kinds", "    role: primary\n", "    role: primary\n    gpus:\n      count: 0\n", "", ""),
]
# The last case is valid (a CPU primary is allowed); it guards against over-eager rules.
VALID_VARIANTS = [INVALID.pop()]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def _line_of(text: str, needle: str) -> int:
    """1-based line where ``needle`` starts in ``text`` (its first line for multi-line needles)."""
    index = text.index(needle)
    return text.count("\n", 0, index) + 1


def test_base_is_valid(tmp_path: Path) -> None:
    inv = load_inventory(_write(tmp_path, BASE))
    assert inv.primary.name == "node1"
    assert [n.ranks for n in inv.nodes] == [4, 4]
    assert inv.nodes[1].fabric.hca == ["mlx5_0"]  # inherited from cluster.defaults; one name is a list of one
    assert inv.image.versions.mofed == "4.7-3.2.9.0"  # the paper-2020 profile's default


@pytest.mark.parametrize(
    ("old", "new"), [(c[1], c[2]) for c in VALID_VARIANTS], ids=[c[0] for c in VALID_VARIANTS]
)
def test_valid_variants(tmp_path: Path, old: str, new: str) -> None:
    assert old in BASE
    assert main(["inventory", "validate", str(_write(tmp_path, BASE.replace(old, new, 1)))]) == 0


def test_at_least_twenty_invalid_cases() -> None:
    assert len(INVALID) >= 20


@pytest.mark.parametrize(
    ("old", "new", "field", "line_text"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_inventory_exits_2_naming_field_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str, line_text: str
) -> None:
    assert old in BASE, "the case must change the base inventory"
    text = BASE.replace(old, new, 1)
    path = _write(tmp_path, text)
    assert main(["inventory", "validate", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich may wrap; compare on collapsed whitespace
    assert str(path) in err
    assert f"field {field}" in err
    assert f"line {_line_of(text, line_text)}" in err
    assert "Fix:" in err  # every message says what to do
    assert "Traceback" not in err


def test_cross_field_problems_are_listed_node_by_node_then_cluster_wide(tmp_path: Path) -> None:
    """Each node's problems together (in the order of the rules), whichever rules found them."""
    text = (
        BASE.replace("    role: primary\n", "    role: primary\n    slots: 8\n")
        .replace(
            "  - name: node2\n    address: 10.0.0.2\n",
            "  - name: node1\n    address: 10.0.0.1\n    slots: 8\n",
        )
        .replace(
            "      target: /data\n", "      target: /data\n    - source: /srv/other\n      target: /data\n"
        )
    )
    with pytest.raises(InventoryError) as caught:
        load_inventory(_write(tmp_path, text))
    assert re.findall(r"field (\S+):", str(caught.value)) == [
        "nodes[0].slots",
        "nodes[1].name",
        "nodes[1].address",
        "nodes[1].slots",
        "container.mounts[1].target",
    ]


def test_errors_in_defaults_point_at_the_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("      count: 4\n", "      count: many\n")
    assert main(["inventory", "validate", str(_write(tmp_path, text))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cluster.defaults.gpus.count" in err
    assert f"line {_line_of(text, 'count: many')}" in err


def test_not_yaml_and_missing_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "validate", str(_write(tmp_path, "cluster: [unclosed\n"))]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["inventory", "validate", str(tmp_path / "absent.yml")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["paper-c4140.yml", "modern-h100.yml", "sandbox-example.yml"])
def test_shipped_inventories_validate(name: str) -> None:
    inv = load_inventory(data_dir("inventories") / name)
    assert inv.primary.role == "primary"
    assert len({n.name for n in inv.nodes}) == len(inv.nodes)


def test_paper_inventory_is_the_whitepapers_cluster() -> None:
    inv = load_inventory(data_dir("inventories") / "paper-c4140.yml")
    assert [n.fabric_ip for n in inv.nodes] == ["192.168.11.1", "192.168.11.2"]
    assert inv.primary.name == inv.nodes[0].name
    assert {(n.gpus.count, n.gpus.model) for n in inv.nodes} == {(4, "V100-SXM2-16GB")}
    assert {(n.fabric.kind, n.fabric.interface, n.fabric.rate_gbps) for n in inv.nodes} == {
        ("infiniband", "ib0", 100)
    }
    assert (inv.run.batch_size, inv.run.precision, inv.run.xla, inv.run.gdr_level) == (256, "fp16", True, 3)


def test_schema_lists_every_top_level_key(capsys: pytest.CaptureFixture[str]) -> None:

    assert main(["inventory", "schema"]) == 0
    schema = strict_loads(capsys.readouterr().out)
    assert set(schema["properties"]) == {
        "cluster",
        "nodes",
        "container",
        "image",
        "run",
        "workloads",
        "provision",
        "preflight",
        "slurm",
        "baselines",
        "delivery",
        "state",
    }
    assert schema["additionalProperties"] is False


def test_show_prints_every_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inventory", "show", "--json", str(data_dir("inventories") / "paper-c4140.yml")]) == 0

    shown = strict_loads(capsys.readouterr().out)
    assert [n["name"] for n in shown["nodes"]] == ["c4140-1", "c4140-2"]
    assert shown["nodes"][1]["fabric"]["hca"] == ["mlx5_0"]


MOFED = "  profile: paper-2020\n"


def test_mofed_tarball_path_is_resolved_against_the_inventory_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mirror").mkdir()
    tarball = tmp_path / "mirror" / "MLNX_OFED_LINUX-4.7-3.2.9.0-ubuntu18.04-x86_64.tgz"
    tarball.write_bytes(b"not really a tarball")
    text = BASE.replace(MOFED, f"{MOFED}provision:\n  mofed_tarball_path: mirror/{tarball.name}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory plays no part
    inv = load_inventory(_write(tmp_path, text))
    assert inv.provision.mofed_tarball_path == tarball.resolve()
    assert inv.provision.mofed_download_url(inv.image.versions) is None  # pushed, not downloaded


def test_mofed_url_and_tarball_path_together_exit_2_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mofed.tgz").write_bytes(b"x")
    text = BASE.replace(
        MOFED,
        f"{MOFED}provision:\n  mofed_url: https://mirror.example.org/mofed.tgz\n  mofed_tarball_path: mofed.tgz\n",
    )
    path = _write(tmp_path, text)
    assert main(["inventory", "validate", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path}, line {_line_of(text, 'mofed_tarball_path:')}, field provision.mofed_tarball_path" in err
    assert "provision.mofed_url" in err and "Fix: keep one of them" in err


def test_mofed_download_url_defaults_to_mellanox_or_the_mirror(tmp_path: Path) -> None:
    inv = load_inventory(_write(tmp_path, BASE))
    assert inv.provision.mofed_download_url(inv.image.versions) == (
        "https://content.mellanox.com/ofed/MLNX_OFED-4.7-3.2.9.0/MLNX_OFED_LINUX-4.7-3.2.9.0-ubuntu18.04-x86_64.tgz"
    )
    mirror = BASE.replace(MOFED, f"{MOFED}provision:\n  mofed_url: file:///srv/mofed.tgz\n")
    inv = load_inventory(_write(tmp_path, mirror))
    assert inv.provision.mofed_download_url(inv.image.versions) == "file:///srv/mofed.tgz"


def test_schema_describes_the_mofed_tarball_path(capsys: pytest.CaptureFixture[str]) -> None:

    assert main(["inventory", "schema"]) == 0
    schema = strict_loads(capsys.readouterr().out)
    field = schema["$defs"]["ProvisionSpec"]["properties"]["mofed_tarball_path"]
    assert "controller" in field["description"] and "inventory file's directory" in field["description"]
    assert "mofed_url" in field["description"]
