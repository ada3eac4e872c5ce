"""Every rail used, as NCCL expects it: HCA lists, RoCE settings, one interface per cluster, MPI's own
transport in the launch plan, and the inventory refusing what mpirun cannot pass to every rank."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.cli import main
from clusterctl.errors import InventoryError
from clusterctl.inventory import Inventory, load_inventory, validate_document
from clusterctl.run.launchers.mpirun import Mpirun
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job
from clusterctl.workloads.job import Job

ROOT = Path(__file__).resolve().parents[1]
MODERN = ROOT / "inventories" / "modern-h100.yml"
PAPER = ROOT / "inventories" / "paper-c4140.yml"
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"

# The 8 ConnectX-7 of an HGX H100 as ibstat lists them
# (tests/fixtures/ibstat/gpud-h100-8cx7-ib-400-plus-bluefield3-bond-eth.txt).
H100_RAILS = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]

TWO_NODES: dict[str, Any] = {
    "cluster": {
        "name": "c",
        "defaults": {
            "gpus": {"count": 8},
            "fabric": {"kind": "roce", "interface": "ens1f0np0"},
        },
    },
    "nodes": [
        {"name": "a", "address": "10.0.0.1", "role": "primary", "fabric": {"address": "10.1.0.1/24"}},
        {"name": "b", "address": "10.0.0.2", "fabric": {"address": "10.1.0.2/24"}},
    ],
}


def _document(**fabric: Any) -> dict[str, Any]:
    """TWO_NODES with ``fabric`` merged into cluster.defaults.fabric."""
    document = copy.deepcopy(TWO_NODES)
    document["cluster"]["defaults"]["fabric"].update(fabric)
    return document


def _plan(inventory: Inventory, nodes: int = 2) -> Job:
    # A workload the inventory's image runs (the paper image has no PyTorch).
    workload = "tf_cnn_benchmarks" if inventory.image.profile == "paper-2020" else "resnet50"
    options = run_options(inventory, workload, nodes=nodes)
    return build_job(inventory, options, get_workload(workload))


def _mpirun(inventory: Inventory, nodes: int = 2) -> list[str]:
    """The mpirun launcher's command for ``_plan``."""
    return Mpirun().command(inventory, _plan(inventory, nodes))


def _mca(argv: list[str]) -> dict[str, str]:
    """The command's ``-mca NAME VALUE`` pairs."""
    return {argv[i + 1]: argv[i + 2] for i, arg in enumerate(argv) if arg == "-mca"}


# --------------------------------------------------------------------------- HCAs


def test_modern_h100_dry_run_names_every_rail_exactly() -> None:
    inventory = load_inventory(MODERN)
    assert inventory.primary.fabric.hca == H100_RAILS
    plan = _plan(inventory)
    assert plan.env["NCCL_IB_HCA"] == "=" + ",".join(H100_RAILS)
    assert f"NCCL_IB_HCA=={','.join(H100_RAILS)}" in _mpirun(inventory)


def test_cli_dry_run_of_the_modern_inventory_shows_every_rail(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "resnet50", "-i", str(MODERN), "--nodes", "2", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9" in printed


def test_a_single_hca_string_stays_valid_and_is_exact() -> None:
    plan = _plan(load_inventory(PAPER))
    assert plan.env["NCCL_IB_HCA"] == "=mlx5_0"


def test_hca_ports_are_passed_as_written() -> None:
    inventory = validate_document(_document(hca=["mlx5_0:1", "mlx5_1:1"]), Path("mem.yml"))
    assert _plan(inventory).env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"


def test_no_hca_in_the_inventory_leaves_nccl_ib_hca_unset() -> None:
    inventory = validate_document(_document(), Path("mem.yml"))
    plan = _plan(inventory)
    assert "NCCL_IB_HCA" not in plan.env
    assert not any(arg.startswith("NCCL_IB_HCA") for arg in _mpirun(inventory))
    assert plan.env["NCCL_IB_DISABLE"] == "0"


@pytest.mark.parametrize(
    ("hca", "words"),
    [
        (["mlx5_0", "mlx5_0"], "names an HCA twice"),
        ([], "empty HCA list"),
        (["mlx5_0:1;id"], "HCA name"),
        (["mlx5_0:x"], "HCA name"),
    ],
)
def test_bad_hca_lists_are_refused(hca: list[str], words: str) -> None:
    with pytest.raises(InventoryError, match=words) as refused:
        validate_document(_document(hca=hca), Path("mem.yml"))
    assert "mem.yml" in str(refused.value) and "cluster.defaults.fabric.hca" in str(refused.value)


# --------------------------------------------------------------------------- RoCE


def test_roce_gid_index_and_traffic_class_reach_every_rank() -> None:
    inventory = validate_document(_document(gid_index=3, traffic_class=106), Path("mem.yml"))
    plan = _plan(inventory)
    assert plan.env["NCCL_IB_GID_INDEX"] == "3"
    assert plan.env["NCCL_IB_TC"] == "106"
    argv = _mpirun(inventory)
    assert "NCCL_IB_GID_INDEX=3" in argv and "NCCL_IB_TC=106" in argv


def test_unset_roce_settings_are_left_to_nccl() -> None:
    plan = _plan(validate_document(_document(), Path("mem.yml")))
    assert "NCCL_IB_GID_INDEX" not in plan.env and "NCCL_IB_TC" not in plan.env


@pytest.mark.parametrize("field", ["gid_index", "traffic_class"])
def test_roce_settings_on_an_infiniband_fabric_are_refused(field: str) -> None:
    with pytest.raises(
        InventoryError, match=f"a sets fabric.{field} but its fabric is infiniband"
    ) as refused:
        validate_document(_document(kind="infiniband", **{field: 3}), Path("mem.yml"))
    assert f"field cluster.defaults.fabric.{field}" in str(refused.value)  # where it was written
    assert "Fix: NCCL applies it to RoCE only, so remove it or set kind: roce" in str(refused.value)


def test_roce_settings_in_defaults_with_the_kind_on_each_node_are_valid() -> None:
    document = copy.deepcopy(TWO_NODES)
    del document["cluster"]["defaults"]["fabric"]["kind"]
    document["cluster"]["defaults"]["fabric"]["gid_index"] = 3
    for node in document["nodes"]:
        node["fabric"]["kind"] = "roce"
    assert _plan(validate_document(document, Path("mem.yml"))).env["NCCL_IB_GID_INDEX"] == "3"


# --------------------------------------------------------------------------- one interface for every rank


def test_nccl_socket_ifname_is_the_exact_interface() -> None:
    plan = _plan(validate_document(_document(), Path("mem.yml")))
    assert plan.env["NCCL_SOCKET_IFNAME"] == "=ens1f0np0"


@pytest.mark.parametrize(
    ("nccl", "prefix"), [("2.4.8", ""), ("2.5.5", ""), ("2.5.6", "="), ("2.21.5", "="), (None, "=")]
)
def test_exact_names_only_for_an_nccl_that_knows_them(nccl: str | None, prefix: str) -> None:
    document = _document(hca=["mlx5_0", "mlx5_1"])
    # The paper image pins its NCCL; a PyTorch image takes the wheel's and refuses a pin.
    document["image"] = {"profile": "paper-2020", "versions": {"nccl": nccl}}
    plan = _plan(validate_document(document, Path("mem.yml")))
    assert plan.env["NCCL_SOCKET_IFNAME"] == f"{prefix}ens1f0np0"
    assert plan.env["NCCL_IB_HCA"] == f"{prefix}mlx5_0,mlx5_1"


@pytest.mark.parametrize(
    ("field", "primary_value", "other_value"),
    [
        ("interface", "ib0", "ib1"),
        ("hca", ["mlx5_0", "mlx5_1"], ["mlx5_0"]),
        ("gid_index", 3, 1),
        ("traffic_class", 106, 0),
    ],
)
def test_nodes_that_differ_in_what_mpirun_passes_to_every_rank_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, primary_value: Any, other_value: Any
) -> None:
    document = copy.deepcopy(TWO_NODES)
    document["nodes"][0]["fabric"][field] = primary_value
    document["nodes"][1]["fabric"][field] = other_value
    path = tmp_path / "mixed.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(InventoryError) as refused:
        load_inventory(path)
    message = str(refused.value)
    assert f"{path}, line" in message
    assert f"field nodes[1].fabric.{field}" in message
    assert f"b has fabric.{field} {other_value!r} but the primary a has {primary_value!r}" in message
    assert "Fix: mpirun gives every rank one value" in message
    assert main(["inventory", "validate", str(path)]) == 2
    assert f"nodes[1].fabric.{field}" in capsys.readouterr().err


# --------------------------------------------------------------------------- MPI's own traffic


@pytest.mark.parametrize(("path", "interface"), [(PAPER, "ib0"), (SANDBOX, "eth0"), (MODERN, "ibp26s0")])
def test_mpi_transport_is_explicit_and_pinned_to_the_fabric_interface(path: Path, interface: str) -> None:
    mca = _mca(_mpirun(load_inventory(path)))
    assert mca["pml"] == "ob1"
    assert mca["btl"] == "^openib"
    assert mca["btl_tcp_if_include"] == interface
    assert mca["oob_tcp_if_include"] == interface
    assert mca["plm_rsh_args"].startswith("-p 50000 ")
