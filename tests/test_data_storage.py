"""`check topology`'s storage finding against the rate the run needs: the JPEGs counted by the real
storage command in a shell, the need read from real recorded runs (tests/fixtures/runs), and the
read-slow finding judged from both."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clusterctl.data.storage import InputNeed, NodeStorage, judge_storage, parse_storage, storage_command
from clusterctl.data.synth import SynthSpec, render_all
from clusterctl.inventory import load_inventory
from clusterctl.paths import data_dir
from clusterctl.results.history import load_runs
from clusterctl.results.input_need import input_need
from clusterctl.results.record import run_device

RUNS = Path(__file__).parent / "fixtures" / "runs"
SMALL = SynthSpec(classes=2, train_per_class=3, val_per_class=1, width=48, height=40, seed=3)


def _answer(path: Path) -> NodeStorage:
    done = subprocess.run(
        ["sh", "-c", storage_command(str(path))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    answer = parse_storage("node1", str(path), done.stdout)
    assert answer is not None
    return answer


def test_the_storage_command_counts_the_jpegs_apart_from_other_files(tmp_path: Path) -> None:
    rendered = list(render_all(SMALL))
    for file, data in rendered:
        (tmp_path / file.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file.path).write_bytes(data)
    (tmp_path / "tfrecords").mkdir()
    (tmp_path / "tfrecords" / "train-00000-of-00001").write_bytes(b"x" * 5000)
    answer = _answer(tmp_path)
    assert answer.files == len(rendered) + 1 and answer.jpegs == len(rendered)
    assert answer.jpeg_bytes == sum(len(data) for _, data in rendered)
    assert answer.mean_jpeg_bytes == answer.jpeg_bytes / len(rendered)


def test_the_need_is_the_best_per_node_rate_recorded_on_the_inventorys_device() -> None:
    inventory = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    runs = load_runs(RUNS).runs
    assert run_device(inventory) == "cpu (1-core nodes)" == runs[0].config.device
    need = input_need(inventory, runs)
    # The 1-node run (5.144 img/s) beats the 2-node ones per node (3.011 / 2, 2.742 / 2).
    assert need is not None and need.images_per_s_per_node == 5.144
    assert "20261125T170728Z_resnet50_1n" in need.source and "best of 3" in need.source
    gpu = inventory.model_copy(
        update={
            "nodes": [
                n.model_copy(update={"gpus": n.gpus.model_copy(update={"count": 8})}) for n in inventory.nodes
            ]
        }
    )
    assert input_need(gpu, runs) is None  # no run on that device
    assert input_need(inventory, [r.model_copy(update={"valid": False}) for r in runs]) is None


def _node(read_mb_s: float | None, jpegs: int = 100, jpeg_bytes: int = 11_000_000) -> NodeStorage:
    return NodeStorage("node1", "/srv", True, 120, 12_000_000, "ab" * 32, read_mb_s, jpegs, jpeg_bytes)


def test_a_node_slower_than_the_run_needs_is_flagged_with_the_figures_and_advice() -> None:
    need = InputNeed(100.0, "run X")  # 100 img/s x 110 KB = 11 MB/s
    slow = judge_storage("/data", "/srv", {"node1": _node(5.0)}, need)
    assert [f.code for f in slow] == ["dataset-read-rate", "dataset-read-slow"]
    assert slow[1].severity == "warning" and slow[1].node == "node1"
    assert "11.00 MB/s" in slow[1].message and "run X" in slow[1].message and "5.00 MB/s" in slow[1].message
    assert "local disk" in slow[1].advice and "loader_workers" in slow[1].advice
    fast = judge_storage("/data", "/srv", {"node1": _node(50.0)}, need)
    assert [f.code for f in fast] == ["dataset-read-rate"] and "needs 11.00 MB/s" in fast[0].message


def test_the_need_is_said_unknown_when_no_rate_or_no_jpeg_is_known() -> None:
    (unknown,) = judge_storage("/data", "/srv", {"node1": _node(5.0)}, None)
    assert "needs is unknown: no valid training run" in unknown.message
    (no_jpeg,) = judge_storage("/data", "/srv", {"node1": _node(5.0, 0, 0)}, InputNeed(1e6, "run X"))
    assert "holds no .JPEG file" in no_jpeg.message
    (unmeasured,) = judge_storage("/data", "/srv", {"node1": _node(None)}, InputNeed(1e6, "run X"))
    assert "not measured" in unmeasured.message
