"""The payload's real input pipeline on files `data synth` renders: real decode by Pillow, real DataLoader
workers, the bad inputs (an undecodable or truncated JPEG, an empty class, train and val naming different
classes), the per-rank shards, the learning-rate warm-up, and `--loader-only` run as the image runs it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from clusterctl.data.synth import SynthSpec, render_all
from clusterctl.workloads.resnet50 import ResNet50
from tests.helpers.jobs import plan_on
from tests.helpers.resnet50_payload import bench

assert bench.__file__  # puts the payload's directory on sys.path, as the image's layout has it
if TYPE_CHECKING:  # the checker reads the payload as the package; the siblings import each other top-level
    from clusterctl.payload import dalidata, imagedata, realtrain
else:
    import dalidata
    import imagedata
    import realtrain

PAYLOAD = Path(bench.__file__)
SPEC = SynthSpec(classes=3, train_per_class=8, val_per_class=3, width=40, height=36, seed=3)


def _write(root: Path, spec: SynthSpec = SPEC) -> Path:
    for file, data in render_all(spec):
        path = root / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("synth"))


def _args(root: Path, **extra: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "data": str(root), "batch_size": 4, "image_size": 32, "loader_workers": 2, "skip_bad_images": False,
        "base_lr": 0.1, "warmup_epochs": 1.0, "epochs": None,
    }  # fmt: skip
    return argparse.Namespace(**{**values, **extra})


def test_workers_decode_crop_and_batch_every_image_of_a_shard(dataset: Path) -> None:
    train, val, classes = imagedata.scan_dataset(str(dataset))
    assert classes == ["n00000000", "n00000001", "n00000002"] and len(train) == 24 and len(val) == 9
    loader = imagedata.make_loader(train, _args(dataset), 0, 1, train=True, pin=False)
    batches = list(loader)
    assert len(batches) == 6
    first = batches[0]
    assert first.images.shape == (4, 3, 32, 32) and str(first.images.dtype) == "torch.uint8"
    assert not first.bad and set(first.labels.tolist()) <= {0, 1, 2}
    images, _ = imagedata.to_device(first, bench.torch.device("cpu"), bench.torch.contiguous_format)
    assert -3.0 < float(images.mean()) < 3.0 and str(images.dtype) == "torch.float32"


def test_validation_shards_count_every_image_once(dataset: Path) -> None:
    _, val, _ = imagedata.scan_dataset(str(dataset))
    seen: list[int] = []
    for rank in range(2):
        seen += list(imagedata.Shard(len(val), rank, 2))
    assert sorted(seen) == list(range(len(val)))


def _broken_copy(dataset: Path, tmp_path: Path) -> tuple[Path, Path]:
    root = _write(tmp_path / "broken")
    victim = sorted((root / "train" / "n00000001").iterdir())[2]
    victim.write_bytes(victim.read_bytes()[:200])  # truncated mid-scan
    return root, victim


def test_a_truncated_jpeg_stops_the_run_naming_the_file(dataset: Path, tmp_path: Path) -> None:
    root, victim = _broken_copy(dataset, tmp_path)
    train, _, _ = imagedata.scan_dataset(str(root))
    loader = imagedata.make_loader(train, _args(root), 0, 1, train=True, pin=False)
    with pytest.raises(SystemExit, match=str(victim)) as stopped:
        for batch in loader:
            imagedata.check_bad(batch, skip=False)
    assert "--skip-bad-images" in str(stopped.value)


def test_skip_bad_images_leaves_the_file_out_and_counts_it(dataset: Path, tmp_path: Path) -> None:
    root, _ = _broken_copy(dataset, tmp_path)
    train, _, _ = imagedata.scan_dataset(str(root))
    loader = imagedata.make_loader(train, _args(root, loader_workers=0), 0, 1, train=True, pin=False)
    skipped = sum(imagedata.check_bad(batch, skip=True) for batch in loader)
    assert skipped == 1


def test_an_empty_class_or_different_classes_are_named(dataset: Path, tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    for path in (root / "val" / "n00000002").iterdir():
        path.unlink()
    with pytest.raises(SystemExit, match=r"empty class .*val/n00000002"):
        imagedata.scan_dataset(str(root))
    (root / "val" / "n00000002").rmdir()
    with pytest.raises(SystemExit, match=r"different classes.*only in train/: \['n00000002'\]"):
        imagedata.scan_dataset(str(root))
    with pytest.raises(SystemExit, match="missing"):
        imagedata.scan_dataset(str(tmp_path / "nothing"))


def test_learning_rate_warms_up_linearly_to_the_scaled_rate() -> None:
    args = _args(Path("/x"), batch_size=32, base_lr=0.1, warmup_epochs=2.0)
    peak = 0.1 * 32 * 8 / 256
    assert realtrain.learning_rate(0, 10, args, 8) == pytest.approx(peak / 8)
    assert realtrain.learning_rate(10, 10, args, 8) == pytest.approx(peak / 8 + (peak - peak / 8) / 2)
    assert realtrain.learning_rate(20, 10, args, 8) == pytest.approx(peak)
    assert realtrain.learning_rate(500, 10, args, 8) == pytest.approx(peak)


def test_input_bound_verdict_reads_the_share_and_the_rates() -> None:
    assert realtrain.input_verdict(loader=100.0, training=95.0, share=0.01)
    assert realtrain.input_verdict(loader=1000.0, training=95.0, share=0.4)
    assert not realtrain.input_verdict(loader=1000.0, training=95.0, share=0.02)


def test_loader_only_runs_the_pipeline_alone_and_reports_per_worker(dataset: Path) -> None:
    """One rank of the payload as the image runs it: no model, a loader line and the result line."""
    done = subprocess.run(
        [sys.executable, str(PAYLOAD), "--framework=ddp", f"--data={dataset}", "--loader-only", "--steps=4",
         "--batch-size=4", "--image-size=32", "--loader-workers=2", "--master-port=29731"],
        capture_output=True, text=True, timeout=300, cwd=PAYLOAD.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
             if line.startswith(("CLUSTERCTL_LOADER ", "CLUSTERCTL_RESULT "))}  # fmt: skip
    loader, result = lines["CLUSTERCTL_LOADER"], lines["CLUSTERCTL_RESULT"]
    assert loader["workers"] == 2 and loader["images"] > 0 and loader["images_per_sec"] > 0
    assert result["loader_only"] is True and result["total_images_per_sec"] == pytest.approx(
        loader["images_per_sec"], rel=1e-3
    )
    assert "clusterctl-peak" not in done.stdout  # no model, no GEMM peak
    assert loader["decoder"] == result["decoder"] == "pillow"  # a CPU rank: DALI is for GPUs
    (note,) = [
        f
        for f in ResNet50().sanity(done.stdout, plan_on("sandbox-example.yml", "resnet50", nodes=1))
        if f.code == "input-decoder"
    ]
    assert note.severity == "info" and "Pillow in DataLoader worker processes" in note.message


def test_dali_is_chosen_only_on_a_gpu_where_it_imports_and_bad_images_need_not_be_skipped(
    dataset: Path,
) -> None:
    args = _args(dataset)
    assert imagedata.decoder(args, gpu=False) == "pillow"
    # DALI is not installed here (no GPU image): a GPU rank falls back to Pillow, as on any image without it.
    assert not dalidata.dali_importable() and imagedata.decoder(args, gpu=True) == "pillow"
    loader = imagedata.make_loader([], args, 0, 1, train=True, pin=True)
    assert isinstance(loader, torch.utils.data.DataLoader)
