"""Defaults and bad input on the command line: the default inventory everywhere, and every option that
is split or parsed by hand refusing bad values with exit 2 and the option's name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.cli.common import INVENTORY_ENV
from clusterctl.paths import data_dir
from clusterctl.sandbox.state import sandbox_files
from tests.helpers.strictjson import strict_loads

PAPER = data_dir("inventories") / "paper-c4140.yml"
# The workload the paper image runs (resnet50 is refused there when the plan is built).
TF_CNN = "tf_cnn_benchmarks"


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory with no sandbox, and no inventory in the environment."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    return tmp_path / "state"


@pytest.mark.parametrize("command", ["validate", "show"])
def test_inventory_commands_without_file_use_the_environments_inventory(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen = tmp_path / "chosen.yml"
    shutil.copy(PAPER, chosen)
    monkeypatch.setenv(INVENTORY_ENV, str(chosen))
    assert main(["inventory", command]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert str(chosen) in out and "paper-c4140" in out


@pytest.mark.parametrize("command", ["validate", "show"])
def test_inventory_commands_without_file_use_the_sandboxs_inventory(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox = sandbox_files().inventory  # where `sandbox up` writes it
    sandbox.parent.mkdir(parents=True)
    shutil.copy(PAPER, sandbox)
    assert main(["inventory", command]) == 0
    assert str(sandbox) in capsys.readouterr().out.replace("\n", "")


@pytest.mark.parametrize("command", ["validate", "show"])
def test_inventory_commands_without_any_inventory_say_how_to_get_one(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inventory", command]) == 2
    err = capsys.readouterr().err
    assert "no inventory given" in err and "clusterctl sandbox up" in err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["sweep", TF_CNN, "--gpus", "1,x"], "'--gpus'"),
        (["sweep", TF_CNN, "--gpus", "1,,2"], "'--gpus'"),
        (["sweep", TF_CNN, "--gpus", "0"], "'--gpus'"),
        (["sweep", TF_CNN, "--batch-size", "64,big"], "'--batch-size'"),
        (["sweep", TF_CNN, "--precision", "fp16,fp8"], "--precision 'fp8'"),
        (["sweep", TF_CNN, "--framework", "horovod,"], "'--framework'"),
        (["sweep", TF_CNN, "--framework", "tf"], "--framework 'tf'"),
        (["sweep", TF_CNN, "--steps", "0"], "--steps 0"),
        (["run", TF_CNN, "--precision", "fp8"], "--precision 'fp8'"),
        (["run", TF_CNN, "--batch-size", "0"], "--batch-size 0"),
        (["provision", "--limit", "c4140-1,nope"], "--limit 'c4140-1,nope': no node named nope"),
        (["provision", "--limit", ","], "--limit ','"),
        (["image", "build", "--builder", "nope"], "--builder 'nope'"),
    ],
    ids=lambda case: " ".join(case) if isinstance(case, list) else None,
)
def test_hand_parsed_options_refuse_bad_values_naming_the_option(
    args: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dry = ["--dry-run"] if args[0] in ("sweep", "run", "provision") else []
    assert main([*args, "-i", str(PAPER), *dry]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert named in err
    assert "internal error" not in err
    assert not (tmp_path / "state" / "logs").exists()


def test_sweep_parses_its_lists_into_one_plan_per_combination(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "sweep",
            TF_CNN,
            "-i",
            str(PAPER),
            "--gpus",
            "1, 2",
            "--batch-size",
            "32,64",
            "--precision",
            "fp32",
            "--dry-run",
        ]
    )
    assert code == 0
    plans = capsys.readouterr().out.splitlines()
    assert [(("-np 1" in p), ("--batch_size=32" in p)) for p in plans] == [
        (True, True),
        (False, True),
        (True, False),
        (False, False),
    ]
    assert all("--use_fp16=False" in p for p in plans)


@pytest.mark.parametrize(
    ("workload", "inventory", "expected_gb"),
    [
        ("tf_cnn_benchmarks", "paper-c4140.yml", "11.25"),  # 25,559,081 x 4 B x 110 steps, 2 nodes
        ("nccl-tests", "modern-h100.yml", "85.90"),  # (2^31 - 8) B x 2 x 20, 2 nodes
    ],
)
def test_a_dry_run_states_the_bytes_per_node_the_proof_will_expect(
    workload: str, inventory: str, expected_gb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On stderr (the command on stdout still pastes exactly), and in --json beside the command."""
    path = str(data_dir("inventories") / inventory)
    assert main(["run", workload, "-i", path, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("mpirun ") and "proof by counters" not in out
    assert f"= {expected_gb} GB per node" in err and "each node's fabric must carry >=" in err
    assert main(["run", workload, "-i", path, "--dry-run", "--json"]) == 0
    [plan] = strict_loads(capsys.readouterr().out)
    counters = plan["counters"]
    assert f"{counters['expected_bytes_per_node'] / 1e9:.2f}" == expected_gb
    assert counters["floor_bytes_per_node"] == int(counters["expected_bytes_per_node"] * 0.9)
