"""Real data on the 2-node sandbox (issues 23, 40): `data synth` with no directory writes the dataset onto
both nodes over SSH (/srv/synth, which the sandbox's benchmark containers see at /data/synth), skipped when
there, refused over files it did not write; then `run resnet50 --data` reads it through that mount with
real workers, with no inventory edit and no container restart: the loader alone and a 1-node run. A copy
of the inventory that only adds run settings (the learning rate, under workloads.resnet50) trains a
2-node run to a target; then the report's data and time-to-target, `--drop-caches` refused on container
nodes, `check topology` finding a node whose dataset differs, and a node without the dataset refused
before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterctl.cli import main
from tests.helpers.sandbox import Sandbox, benchmark_containers, on_node
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration

NODE_PATH = "/srv/synth"  # the sandbox's default dataset on the nodes: /data/synth in the containers
SYNTH = [
    "--classes",
    "4",
    "--train-per-class",
    "16",
    "--val-per-class",
    "4",
    "--width",
    "48",
    "--height",
    "48",
    "--tfrecords",
    "2",
]
# The runs' settings on the command line: the sandbox's inventory stays as `sandbox up` wrote it.
SMALL = ["--image-size", "32", "--loader-workers", "1", "--framework", "ddp"]


def _training_inventory(sandbox: Sandbox, out: Path) -> Path:
    """The sandbox's inventory plus run settings only (no mount, so the containers stay as they are):
    run.data for `check topology`, and resnet50's learning rate for a few epochs of 16 images."""
    yaml = YAML(typ="rt")
    document = yaml.load(sandbox.inventory_path.read_text())
    document["run"]["data"] = "/data/synth"
    document["workloads"] = {
        "resnet50": {"image_size": 32, "batch_size": 8, "loader_workers": 1, "base_lr": 0.4,
                     "warmup_epochs": 0.0, "framework": "ddp"}
    }  # fmt: skip
    path = out / "real-data.yml"
    with path.open("w") as fh:
        yaml.dump(document, fh)
    return path


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, strict_loads(captured.out) if captured.out.strip() else None, captured.err


def test_data_synth_then_real_data_runs(
    sandbox2: Sandbox, cluster: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs")]

    code, made, err = _json(capsys, "data", "synth", *SYNTH)  # no -i, no --path: the sandbox's own
    assert code == 0, err[-2000:]
    assert made["path"] == NODE_PATH and made["files"] == 80 + 3  # 2 train + 1 validation shards
    assert [n["outcome"] for n in made["nodes"]] == ["written", "written"]
    for node in ("node1", "node2"):
        listed = on_node(sandbox2, node, "sh", "-c", f"find {NODE_PATH} -name '*.JPEG' | wc -l")
        assert listed.strip() == "80"
    shards = on_node(sandbox2, "node1", "ls", f"{NODE_PATH}/tfrecords").split()
    assert shards == ["train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00001"]
    code, again, _ = _json(capsys, "data", "synth", *SYNTH)
    assert code == 0 and [n["outcome"] for n in again["nodes"]] == ["skipped", "skipped"]
    assert again["digest"] == made["digest"]  # deterministic from the seed

    theirs = "/srv/clusterctl-it-theirs"
    on_node(sandbox2, "node1", "sh", "-c", f"mkdir -p {theirs} && echo mine > {theirs}/a")
    code, _, err = _json(capsys, "data", "synth", *SYNTH, "--path", theirs)
    assert code == 2 and f"node1:{theirs}" in err
    assert on_node(sandbox2, "node1", "cat", f"{theirs}/a").strip() == "mine"
    assert on_node(sandbox2, "node2", "ls", "-d", theirs, check=False).strip() == ""  # nothing written

    assert main(["up"]) == 0
    capsys.readouterr()
    started = benchmark_containers(sandbox2.inventory)
    code, loader, err = _json(
        capsys, "run", "resnet50", *runs, "--nodes", "2", "--loader-only", "--steps", "4", *SMALL, "--data"
    )
    assert code == 0, err[-3000:]
    (record,) = loader["runs"]
    assert record["valid"] and record["config"]["data"] == "real-loader"
    assert record["metrics"]["loader_images_per_sec_per_worker"]["value"] > 0

    code, one, err = _json(capsys, "run", "resnet50", *runs, "--data", "--nodes", "1", "--steps", "3", *SMALL)
    assert code == 0, err[-3000:]
    (record,) = one["runs"]
    assert record["valid"] and record["config"]["data"] == "real"
    assert record["metrics"]["loader_images_per_sec"]["value"] > 0
    assert record["metrics"]["total_images_per_sec"]["value"] > 0

    inv = ["-i", str(_training_inventory(sandbox2, tmp_path))]
    code, trained, err = _json(
        capsys, "run", "resnet50", *inv, *runs, "--nodes", "2", "--epochs", "12", "--target-top1", "0.5"
    )
    assert code == 0, err[-3000:]
    (record,) = trained["runs"]
    assert record["valid"], record["findings"]
    assert record["world_size"] == 2 and record["metrics"]["top1"]["value"] >= 0.5
    assert record["metrics"]["time_to_target_s"]["value"] > 0
    assert benchmark_containers(sandbox2.inventory) == started  # the same containers, never restarted

    code, report, _ = _json(capsys, "report", *runs)
    assert code == 0 and report is not None and report["schema"] == "clusterctl.report/1"
    rows = {(row["config"]["data"], row["devices"]): row for row in report["rows"]}
    assert rows[("real", 2)]["time_to_target_s"] > 0 and rows[("real-loader", 2)]["loader_images_per_sec"] > 0
    assert rows[("real", 2)]["cold_images_per_sec"] > 0 and rows[("real", 2)]["cache_dropped"] is False

    # The sandbox's nodes are containers: their page cache is the whole machine's, never dropped.
    code, _, err = _json(
        capsys, "run", "resnet50", *inv, *runs, "--nodes", "2", "--steps", "3", "--drop-caches"
    )
    assert code == 2 and "node1: the node is a container" in err and "nothing was started" in err

    on_node(sandbox2, "node2", "rm", f"{NODE_PATH}/val/n00000001/n00000001_val_000003.JPEG")
    code, checked, _ = _json(capsys, "check", "topology", *inv, *runs, "--bundle", str(tmp_path / "bundle"))
    dataset = {(f["code"], f["node"]) for f in checked["cluster_findings"] if f["code"].startswith("dataset")}
    assert code == 1 and ("dataset-differs", None) in dataset and ("dataset-read-rate", "node1") in dataset
    # The need: the best training rate recorded above (a real-data run; the loader-only one is no need).
    (rate,) = [
        f for f in checked["cluster_findings"] if (f["code"], f["node"]) == ("dataset-read-rate", "node1")
    ]
    assert "the run needs" in rate["message"] and "real data" in rate["message"]

    on_node(sandbox2, "node2", "rm", "-rf", NODE_PATH)
    on_node(sandbox2, "node1", "rm", "-rf", theirs)
    code, _, err = _json(capsys, "run", "resnet50", *runs, "--nodes", "2", "--steps", "3", "--data")
    assert code == 2 and f"node2:{NODE_PATH} is absent" in err
    on_node(sandbox2, "node1", "rm", "-rf", NODE_PATH)
