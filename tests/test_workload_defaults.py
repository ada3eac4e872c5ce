"""Every shipped inventory runs every workload its image can run with the workload's own defaults, and an
inventory sets them per workload (issue 40 item 5): the workload's defaults for the devices, then the
inventory's run section, then its workloads.<name> section, then the command line."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterctl.cli import main
from clusterctl.errors import InputError
from clusterctl.inventory import load_inventory, validate_document
from clusterctl.inventory.models import WorkloadName
from clusterctl.run.plan import run_options
from clusterctl.workloads import NAMES, get_workload
from clusterctl.workloads.images import check_image_runs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "inventories").glob("*.yml"))
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
H100 = ROOT / "inventories" / "modern-h100.yml"


def _runnable() -> list[tuple[str, str]]:
    """(inventory file name, workload) for every workload each shipped inventory's image can run (allreduce
    measures CPU ranks: GPU nodes run nccl-tests instead, a refusal by design)."""
    pairs = []
    for path in SHIPPED:
        inventory = load_inventory(path)
        for name in NAMES:
            try:
                check_image_runs(get_workload(name), inventory)
            except InputError:  # the image lacks what the workload needs (paper-2020: no PyTorch)
                continue
            if not (name == "allreduce" and inventory.primary.gpus.count):
                pairs.append((path.name, name))
    return pairs


RUNNABLE = _runnable()


def test_the_shipped_inventories_cover_gpt_on_cpus_and_on_gpus() -> None:
    assert {("sandbox-example.yml", "gpt"), ("modern-h100.yml", "gpt")} <= set(RUNNABLE)


@pytest.mark.parametrize(("inventory", "workload"), RUNNABLE)
def test_every_shipped_inventory_plans_every_workload_it_runs_with_its_defaults(
    inventory: str, workload: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", workload, "--nodes", "2", "--dry-run", "-i", str(ROOT / "inventories" / inventory)])
    assert code == 0, capsys.readouterr().err


def _options(path: Path, workload: str, **overrides: Any) -> dict[str, Any]:
    return run_options(load_inventory(path), workload, **overrides).settings.model_dump()


def test_gpt_defaults_fit_the_devices() -> None:
    cpu = _options(SANDBOX, "gpt")
    assert (cpu["framework"], cpu["model_size"], cpu["seq_len"], cpu["batch_size"]) == ("ddp", "tiny", 64, 8)
    gpu = _options(H100, "gpt")
    assert (gpu["framework"], gpu["model_size"], gpu["seq_len"], gpu["batch_size"]) == (
        "ddp",
        "124m",
        1024,
        8,
    )
    assert gpu["precision"] == "bf16"  # the inventory's run section, read by every workload


def _document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = YAML(typ="safe").load(path.read_text())
    return document


def test_gpt_halves_its_batch_until_it_fits_a_smaller_gpu(tmp_path: Path) -> None:
    document = _document(H100)
    document["cluster"]["defaults"]["gpus"]["model"] = "V100-SXM2-16GB"
    inventory = validate_document(document, tmp_path / "v100.yml")
    settings = run_options(inventory, "gpt").settings
    assert (settings.model_size, settings.batch_size) == ("124m", 4)  # fp32 estimate: 12.2 GB of 16
    assert settings.precision == "bf16"


def test_resnet50_defaults_are_small_on_cpus_and_the_whitepapers_on_gpus() -> None:
    cpu = _options(SANDBOX, "resnet50")
    assert (cpu["batch_size"], cpu["image_size"]) == (8, 64)
    gpu = _options(H100, "resnet50")  # workloads.resnet50 in the shipped file
    assert (gpu["framework"], gpu["batch_size"], gpu["image_size"], gpu["data_format"]) == (
        "horovod",
        256,
        224,
        "NHWC",
    )


def test_workload_section_wins_over_run_and_the_command_line_over_both(tmp_path: Path) -> None:
    document = _document(SANDBOX)
    document["run"] = {"batch_size": 16, "steps": 3}
    document["workloads"] = {"gpt": {"batch_size": 4, "seq_len": 64}, "resnet50": {"image_size": 32}}
    inventory = validate_document(document, tmp_path / "inv.yml")

    gpt = run_options(inventory, "gpt").settings
    assert (gpt.batch_size, gpt.seq_len, gpt.model_size, gpt.steps) == (4, 64, "tiny", 3)
    resnet = run_options(inventory, "resnet50").settings
    assert (resnet.batch_size, resnet.image_size, resnet.steps) == (16, 32, 3)
    given = run_options(inventory, "gpt", batch_size=2, seq_len=32).settings
    assert (given.batch_size, given.seq_len) == (2, 32)


def _validate(
    tmp_path: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    path = tmp_path / "inv.yml"
    with path.open("w") as fh:
        YAML(typ="safe").dump(document, fh)
    code = main(["inventory", "validate", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"gpt": {"batch_sise": 4}}, ["workloads.gpt.batch_sise"]),
        ({"gpt": {"batch_size": 0}}, ["workloads.gpt.batch_size", "greater than or equal to 1"]),
        ({"gpt": {"batch_size": None}}, ["workloads.gpt.batch_size"]),
        ({"gpt": {"model_size": "huge"}}, ["workloads.gpt.model_size", "no gpt size"]),
        ({"bert": {"batch_size": 4}}, ["workloads", "bert"]),
    ],
)
def test_a_bad_workload_section_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, Any], words: list[str]
) -> None:
    document = _document(SANDBOX)
    document["workloads"] = section
    code, err = _validate(tmp_path, document, capsys)
    assert code == 2
    for word in words:
        assert word in err, err


def test_an_old_inventory_s_resnet_batch_still_reads_and_gpt_s_refusal_names_the_new_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _document(H100)
    document["run"] = {"framework": "horovod", "batch_size": 256, "precision": "bf16"}
    del document["workloads"]
    path = tmp_path / "old.yml"
    with path.open("w") as fh:
        YAML(typ="safe").dump(document, fh)
    assert main(["run", "resnet50", "--nodes", "2", "--dry-run", "-i", str(path)]) == 0
    capsys.readouterr()
    assert main(["run", "gpt", "--nodes", "2", "--dry-run", "-i", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "run.batch_size is read by every workload" in err and "workloads.resnet50" in err, err
    assert main(["run", "gpt", "--nodes", "2", "--dry-run", "-i", str(path), "--batch-size", "8"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--framework horovod" in err and "workloads.gpt.framework: ddp" in err, err


def test_the_inventory_s_workload_names_are_the_registry_s() -> None:
    assert set(typing.get_args(WorkloadName)) == set(NAMES)
