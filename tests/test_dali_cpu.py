"""The resnet50 payload's DALI pipeline (``dalidata``, the modern image's input path on GPUs) run for real
on DALI's CPU backend, beside the Pillow path it replaces, on one synthesized set: the same images get
the same labels (class directories sorted by name), one epoch reads exactly the count the Pillow
loader reads, per shard and in all, and the shards' guarantees hold over two epochs (training: disjoint
across ranks, the last partial batch dropped; validation: every image once over all ranks, each
rank's shard in file order, the same shard every epoch).

DALI is not in .venv: scripts/setup-env.sh installs requirements/dali.txt into a directory of its own
(CLUSTERCTL_DALI_DIR), and the pipeline runs in a process of its own (tests/helpers/dali_epochs.py).
Each image is one flat colour that names it, so what a batch holds is read back from its pixels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from PIL import Image

from tests.helpers.resnet50_payload import bench

assert bench.__file__  # puts the payload's directory on sys.path, as the image's layout has it
if TYPE_CHECKING:
    from clusterctl.payload import imagedata
else:
    import imagedata

HELPER = Path(__file__).parent / "helpers" / "dali_epochs.py"
# Uneven on purpose: 21 training and 15 validation images over 2 ranks leave shards of unequal size,
# where a reader that moves its shard on reads an image twice in a second validation epoch.
CLASSES, TRAIN_PER_CLASS, VAL_PER_CLASS, WORLD, BATCH, SIZE = 3, 7, 5, 2, 4, 32


def _dali_dir() -> Path:
    path = Path(os.environ.get("CLUSTERCTL_DALI_DIR", Path.home() / ".cache" / "clusterctl" / "dali-cpu"))
    if not (path / "nvidia" / "dali").is_dir():
        pytest.fail(f"no DALI in {path}: run scripts/setup-env.sh (it installs requirements/dali.txt there)")
    return path


def _colour(number: int, label: int) -> tuple[int, int, int]:
    """Image ``number``'s flat colour (dali_epochs.identity reads it back); blue follows the class."""
    return (number % 16) * 16 + 8, (number // 16) * 16 + 8, 40 * label + 20


def _synthesize(root: Path) -> dict[str, list[int]]:
    """Every split's image numbers, in file order; file ``NNN.jpg`` is image NNN."""
    numbers: dict[str, list[int]] = {"train": [], "val": []}
    number = 0
    for split, per_class in (("train", TRAIN_PER_CLASS), ("val", VAL_PER_CLASS)):
        for label in range(CLASSES):
            folder = root / split / f"class{label}"
            folder.mkdir(parents=True)
            for _ in range(per_class):
                image = Image.new("RGB", (48, 40), _colour(number, label))
                image.save(folder / f"{number:03d}.jpg", quality=95)
                numbers[split].append(number)
                number += 1
    return numbers


def _number(sample: imagedata.Sample) -> int:
    path, _ = sample
    return int(Path(path).stem)


def test_the_dali_pipeline_on_cpu_reads_what_the_pillow_path_reads(tmp_path: Path) -> None:
    numbers = _synthesize(tmp_path)
    done = subprocess.run(
        [sys.executable, str(HELPER), str(_dali_dir()), str(tmp_path), str(WORLD), str(BATCH), str(SIZE)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    dali = json.loads(done.stdout)

    # The Pillow path on the same files: its labels, and what one epoch of each rank's loader reads.
    train, val, _ = imagedata.scan_dataset(str(tmp_path))
    label_of = {_number(s): s[1] for s in train + val}
    assert sorted(set(label_of.values())) == list(range(CLASSES))
    args = argparse.Namespace(image_size=SIZE, batch_size=BATCH, loader_workers=0)
    pillow = {
        split: [imagedata.make_loader(samples, args, r, WORLD, train=split == "train", pin=False) for r in range(WORLD)]
        for split, samples in (("train", train), ("val", val))
    }  # fmt: skip

    for split in ("train", "val"):
        for rank, shard in enumerate(dali[split]):
            assert shard["device"] == "cpu" and len(shard["epochs"]) == 2
            for epoch in shard["epochs"]:
                # the same labels: each image DALI decoded carries the label Pillow's scan gives its file
                assert all(label == label_of[number] for number, label in epoch), (split, rank, epoch)
                assert len({number for number, _ in epoch}) == len(epoch), (split, rank, epoch)  # no repeat

    for rank, shard in enumerate(dali["train"]):
        # Both drop a shard's last partial batch: the same batches per epoch, full ones.
        assert shard["batches"] == len(pillow["train"][rank])
        assert all(len(epoch) == shard["batches"] * BATCH for epoch in shard["epochs"])
        assert all(number in numbers["train"] for epoch in shard["epochs"] for number, _ in epoch)
    for epoch in range(2):
        ranks = [{number for number, _ in shard["epochs"][epoch]} for shard in dali["train"]]
        assert not ranks[0] & ranks[1], f"training epoch {epoch}: the ranks' shards overlap"
    assert sum(len(loader) * BATCH for loader in pillow["train"]) == sum(
        len(shard["epochs"][0]) for shard in dali["train"]
    )

    # Validation: every image exactly once per epoch over the ranks (as Pillow's shards), each rank's
    # shard in file order, and the same shard in the second epoch.
    shards = [loader.sampler for loader in pillow["val"]]
    assert all(isinstance(shard, imagedata.Shard) for shard in shards)
    pillow_val = sorted(_number(val[i]) for shard in shards for i in cast(imagedata.Shard, shard).indices)
    assert pillow_val == numbers["val"]
    for epoch in range(2):
        read = [[number for number, _ in shard["epochs"][epoch]] for shard in dali["val"]]
        assert sorted(read[0] + read[1]) == numbers["val"], f"validation epoch {epoch}: {read}"
        assert all(shard_read == sorted(shard_read) for shard_read in read), read
    assert all(shard["epochs"][0] == shard["epochs"][1] for shard in dali["val"])
    assert [shard["batches"] for shard in dali["val"]] == [
        -(-len(s["epochs"][0]) // BATCH) for s in dali["val"]
    ]
