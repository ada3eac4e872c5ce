"""The job and the mpirun launcher: the whitepaper's command, fabric settings, node selection, quoting."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from clusterctl.errors import InputError, InventoryError
from clusterctl.inventory import load_inventory, validate_document
from clusterctl.run.launchers.mpirun import Mpirun, shell_command
from clusterctl.run.plan import run_options
from clusterctl.workloads import get_workload
from clusterctl.workloads.build import build_job

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "inventories" / "paper-c4140.yml"
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"

# The whitepaper's multi-node command (Appendix, "multi node mode with 8 GPUs"), token by token,
# normalised: its single-dash long flags (-device=gpu, -use_fp16=True, -horovod_device=gpu,
# -data_name=imagenet, -xla=True) are written with the two dashes the scripts parse, `-mca` and
# `--mca` are the same Open MPI flag (written -mca here), and its `--model=ResNet-50` is the prose
# name of the model tf_cnn_benchmarks registers as `resnet50`. Its NCCL_SOCKET_IFNAME=ib0 is written
# =ib0: NCCL reads a bare name as a prefix (ib0 would also select ib00...), `=` makes it exact.
PAPER_FLAGS: list[tuple[str, ...]] = [
    ("mpirun",),
    ("-np", "8"),
    ("-H", "192.168.11.1:4,192.168.11.2:4"),
    ("--allow-run-as-root",),
    ("-x", "NCCL_NET_GDR_LEVEL=3"),
    ("-x", "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING"),
    ("-x", "NCCL_IB_DISABLE=0"),
    ("-mca", "btl_tcp_if_include", "ib0"),
    ("-x", "NCCL_SOCKET_IFNAME==ib0"),
    ("-x", "NCCL_DEBUG=INFO"),
    ("-x", "HOROVOD_MPI_THREADS_DISABLE=1"),
    ("--bind-to", "none"),
    ("--map-by", "slot"),
    ("python", "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py"),
    ("--device=gpu",),
    ("--data_format=NCHW",),
    ("--optimizer=sgd",),
    ("--distortions=false",),
    ("--use_fp16=True",),
    ("--local_parameter_device=gpu",),
    ("--variable_update=horovod",),
    ("--horovod_device=gpu",),
    ("--datasets_num_private_threads=4",),
    ("--data_dir=/data/train",),
    ("--data_name=imagenet",),
    ("--display_every=10",),
    ("--model=resnet50",),
    ("--batch_size=256",),
    ("--xla=True",),
]


def _contains_run(argv: list[str], run: tuple[str, ...]) -> bool:
    n = len(run)
    return any(tuple(argv[i : i + n]) == run for i in range(len(argv) - n + 1))


def _plan(path: Path, workload: str, **kwargs):
    inventory = load_inventory(path)
    return build_job(inventory, run_options(inventory, workload, **kwargs), get_workload(workload))


def _argv(path: Path, workload: str, **kwargs) -> list[str]:
    """The mpirun launcher's command for the job of ``workload`` on the inventory at ``path``."""
    return Mpirun().command(load_inventory(path), _plan(path, workload, **kwargs))


def test_paper_dry_run_carries_every_flag_of_the_whitepaper_command() -> None:
    argv = _argv(PAPER, "tf_cnn_benchmarks", nodes=2)
    missing = [run for run in PAPER_FLAGS if not _contains_run(argv, run)]
    assert missing == []
    # plm_rsh_args "-p 50000", extended with the container's key and strict host-key checking.
    rsh = argv[argv.index("plm_rsh_args") + 1]
    assert rsh.startswith("-p 50000 ")
    assert "StrictHostKeyChecking=yes" in rsh
    assert "LD_PRELOAD" in argv  # libhwloc preload on the paper-2020 image


def test_shell_command_round_trips_through_a_shell_parser() -> None:
    argv = _argv(PAPER, "tf_cnn_benchmarks", nodes=2)
    assert shlex.split(shell_command(argv)) == argv


def test_ethernet_sandbox_disables_nccl_ib_and_uses_its_interface() -> None:
    plan = _plan(SANDBOX, "resnet50", nodes=2)
    assert plan.env["NCCL_IB_DISABLE"] == "1"
    assert plan.env["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert "NCCL_NET_GDR_LEVEL" not in plan.env
    assert not plan.gpu


def test_hosts_use_fabric_addresses_with_ranks_per_node() -> None:
    argv = _argv(PAPER, "tf_cnn_benchmarks", nodes=2)
    assert argv[argv.index("-H") + 1] == "192.168.11.1:4,192.168.11.2:4"
    assert _plan(PAPER, "tf_cnn_benchmarks", nodes=2).world_size == 8
    two = _argv(PAPER, "tf_cnn_benchmarks", nodes=2, ranks_per_node=2)
    assert two[two.index("-np") + 1] == "4"


def test_nodes_n_picks_the_primary_and_n_minus_1_secondaries() -> None:
    document = {
        "cluster": {"name": "c", "defaults": {"gpus": {"count": 0}}},
        "nodes": [
            {"name": "b", "address": "10.0.0.2"},
            {"name": "a", "address": "10.0.0.1", "role": "primary"},
            {"name": "c", "address": "10.0.0.3"},
        ],
    }
    inventory = validate_document(document, Path("mem.yml"))
    for count, names in ((1, ["a"]), (2, ["a", "b"]), (3, ["a", "b", "c"])):
        plan = build_job(inventory, run_options(inventory, "resnet50", nodes=count), get_workload("resnet50"))
        assert [h.node for h in plan.hosts] == names
    with pytest.raises(InputError, match="has 3 node"):
        run_options(inventory, "resnet50", nodes=4)


def test_ddp_rendezvous_is_rank_0s_fabric_address() -> None:
    plan = _plan(SANDBOX, "resnet50", nodes=2, framework="ddp")
    assert plan.env["MASTER_ADDR"] == "10.213.0.11" and plan.env["MASTER_PORT"] == "29500"
    assert _contains_run(
        _argv(SANDBOX, "resnet50", nodes=2, framework="ddp"), ("-x", "MASTER_ADDR=10.213.0.11")
    )
    assert "MASTER_ADDR" not in _plan(SANDBOX, "resnet50", nodes=2, framework="horovod").env


def test_ssh_ranks_start_bound_through_the_wrapper_except_on_the_paper_image() -> None:
    modern = _argv(ROOT / "inventories" / "modern-h100.yml", "resnet50", nodes=2)
    script = modern.index("/opt/clusterctl/payload/resnet50_bench.py")
    # mpirun leaves the binding to the wrapper, which starts the rank's own command
    assert modern[script - 4 : script] == ["python3", "/opt/clusterctl/payload/bind.py", "--", "python"]
    assert (
        modern[script - 1 :] == _plan(ROOT / "inventories" / "modern-h100.yml", "resnet50", nodes=2).rank_argv
    )
    assert "bind.py" not in " ".join(_argv(PAPER, "tf_cnn_benchmarks", nodes=2))


def test_run_options_are_validated_like_the_inventory() -> None:
    inventory = load_inventory(SANDBOX)
    with pytest.raises(InputError, match="invalid run option"):
        run_options(inventory, "resnet50", precision="fp8")
    with pytest.raises(InputError, match="invalid run option"):
        run_options(inventory, "resnet50", batch_size=0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("interface", "eth0;rm -rf /"), ("hca", "mlx5_0 $(id)")],
)
def test_hostile_fabric_values_never_reach_a_plan(field: str, value: str) -> None:
    document = {
        "cluster": {"name": "c"},
        "nodes": [{"name": "a", "address": "10.0.0.1", "role": "primary", "fabric": {field: value}}],
    }
    with pytest.raises(InventoryError):
        validate_document(document, Path("mem.yml"))


def test_hostile_address_never_reaches_a_plan() -> None:
    document = {"cluster": {"name": "c"}, "nodes": [{"name": "a", "address": "x;reboot", "role": "primary"}]}
    with pytest.raises(InventoryError):
        validate_document(document, Path("mem.yml"))


def test_cli_dry_run_prints_the_pasteable_command(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli import main

    code = main(["run", "tf_cnn_benchmarks", "--nodes", "2", "--dry-run", "-i", str(PAPER)])
    printed = capsys.readouterr().out.strip()
    assert code == 0
    assert printed == shell_command(_argv(PAPER, "tf_cnn_benchmarks", nodes=2))


def test_cli_sweep_dry_run_plans_the_grid(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli import main

    modern = ROOT / "inventories" / "modern-h100.yml"  # resnet50 is PyTorch: the paper image cannot run it
    argv = ["sweep", "resnet50", "-i", str(modern), "--gpus", "1,4,8", "--batch-size", "128,256", "--dry-run"]
    assert main(argv) == 0
    commands = capsys.readouterr().out.strip().splitlines()
    assert [c.split()[2] for c in commands] == ["1", "4", "8", "1", "4", "8"]
    assert sum("--batch-size=256" in c for c in commands) == 3
