"""The resnet50 payload's real input pipeline: an ImageNet-layout directory read by DataLoader workers.

Shipped beside ``resnet50_bench.py`` and imported by it as a sibling; it imports only torch, Pillow and
the standard library, never clusterctl (no CPU build of torchvision exists, so its transforms are
written here). ``<root>/train/<class>/*.JPEG`` and ``<root>/val/<class>/*.JPEG``: classes sorted by
name are the labels, and train and val must name the same classes.

Workers decode with Pillow and apply RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, bilinear) and a
horizontal flip for training, a resize-and-centre-crop (256/224) for validation; batches leave the
workers as uint8 (a quarter of float32's bytes through shared and pinned memory) and are normalised on
the device. Each rank reads its own shard of every epoch (``DistributedSampler``'s order for training,
a strided shard without padding for validation, so every image is counted once).

On a GPU where NVIDIA DALI imports (the modern image), ``dalidata.DaliLoader`` reads instead: the same
shards, crops and batches, decoded on the GPU; ``decoder`` says which ran, and the result line carries it.

A file that does not decode stops the run with its path, or, with ``--skip-bad-images``, is left out
and counted. ``--loader-only`` runs the pipeline alone and prints, per rank:

    CLUSTERCTL_LOADER {"rank": 0, "host": ..., "workers": ..., "images": ..., "images_per_sec": ...}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data.distributed import DistributedSampler

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload.dalidata import DaliLoader, dali_importable
else:
    from dalidata import DaliLoader, dali_importable

LOADER_PREFIX = "CLUSTERCTL_LOADER "
EXTENSIONS = (".jpeg", ".jpg", ".png")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# The workers' batches waiting for the training loop, per worker (torch's default is 2).
PREFETCH = 4


Sample = tuple[str, int]


def _scan_split(root: str, split: str) -> tuple[list[Sample], list[str]]:
    """Every image of ``root/split`` with its label, and the class names (sorted)."""
    where = os.path.join(root, split)
    if not os.path.isdir(where):
        raise SystemExit(
            f"resnet50_bench: --data {root}: {where} is missing (an ImageNet layout has train/ and val/)."
        )
    classes = sorted(e.name for e in os.scandir(where) if e.is_dir())
    if not classes:
        raise SystemExit(f"resnet50_bench: --data {root}: {where} holds no class directories.")
    samples: list[Sample] = []
    for label, name in enumerate(classes):
        directory = os.path.join(where, name)
        files = sorted(f for f in os.listdir(directory) if f.lower().endswith(EXTENSIONS))
        if not files:
            raise SystemExit(
                f"resnet50_bench: --data {root}: empty class {directory} (no .JPEG, .jpg or .png in it)."
            )
        samples += [(os.path.join(directory, f), label) for f in files]
    return samples, classes


def scan_dataset(root: str) -> tuple[list[Sample], list[Sample], list[str]]:
    """(train samples, val samples, class names) of ``root``; SystemExit naming what is wrong."""
    train, classes = _scan_split(root, "train")
    val, val_classes = _scan_split(root, "val")
    if classes != val_classes:
        only_train = sorted(set(classes) - set(val_classes))
        only_val = sorted(set(val_classes) - set(classes))
        raise SystemExit(
            f"resnet50_bench: --data {root}: train/ and val/ name different classes (labels would not match): "
            f"only in train/: {only_train[:5] or 'none'}; only in val/: {only_val[:5] or 'none'}."
        )
    return train, val, classes


class Bad(NamedTuple):
    """A file that did not decode, and why."""

    path: str
    reason: str


def _random_box(width: int, height: int) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box (scale 0.08-1 of the area, aspect ratio 3/4-4/3); the centre on failure."""
    area = width * height
    for _ in range(10):
        target = area * float(torch.empty(1).uniform_(0.08, 1.0))
        ratio = math.exp(float(torch.empty(1).uniform_(math.log(3 / 4), math.log(4 / 3))))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            x = int(torch.randint(0, width - w + 1, (1,)))
            y = int(torch.randint(0, height - h + 1, (1,)))
            return x, y, x + w, y + h
    return _centre_box(width, height, 1.0)


def _centre_box(width: int, height: int, fraction: float) -> tuple[int, int, int, int]:
    """The centred square of side ``fraction`` of the shorter side."""
    side = max(1, round(min(width, height) * fraction))
    x, y = (width - side) // 2, (height - side) // 2
    return x, y, x + side, y + side


class ImageFolder(Dataset[Any]):
    """Decoded, cropped (and, for training, flipped) images as uint8 CHW tensors with their labels."""

    def __init__(self, samples: list[Sample], size: int, *, train: bool):
        self.samples, self.size, self.train = samples, size, train

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int] | Bad:
        path, label = self.samples[index]
        try:
            with Image.open(path) as img:
                rgb = img.convert("RGB")  # decodes the whole file: a truncated one fails here
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            return Bad(path, str(exc) or type(exc).__name__)
        box = _random_box(*rgb.size) if self.train else _centre_box(*rgb.size, 224 / 256)
        out = rgb.resize((self.size, self.size), Image.Resampling.BILINEAR, box=box)
        if self.train and bool(torch.randint(0, 2, (1,))):
            out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        pixels = torch.frombuffer(bytearray(out.tobytes()), dtype=torch.uint8)
        return pixels.view(self.size, self.size, 3).permute(2, 0, 1), label


class Batch(NamedTuple):
    """Images (uint8 NCHW), labels, and the files of this batch that did not decode."""

    images: torch.Tensor
    labels: torch.Tensor
    bad: list[Bad]


class Decoded(Protocol):
    """What the training loop takes from either pipeline: a ``Batch``, or DALI's (``dalidata.DaliBatch``)."""

    @property
    def images(self) -> torch.Tensor:
        """uint8 NCHW images."""

    @property
    def labels(self) -> torch.Tensor:
        """Their labels."""

    @property
    def bad(self) -> list[Bad]:
        """The files of the batch that did not decode."""


def collate(items: list[tuple[torch.Tensor, int] | Bad]) -> Batch:
    """Stack the decoded items; keep the undecodable ones aside."""
    good = [item for item in items if not isinstance(item, Bad)]
    bad = [item for item in items if isinstance(item, Bad)]
    if not good:
        return Batch(torch.empty(0, dtype=torch.uint8), torch.empty(0, dtype=torch.long), bad)
    return Batch(torch.stack([g[0] for g in good]), torch.tensor([g[1] for g in good]), bad)


class Shard(Sampler[int]):
    """Every ``world``-th index from ``rank``, unpadded: a validation shard that counts each image once."""

    def __init__(self, length: int, rank: int, world: int):
        self.indices = list(range(rank, length, world))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def decoder(args: argparse.Namespace, *, gpu: bool) -> str:
    """Which pipeline reads the images: ``dali`` on a GPU where DALI imports (not with
    ``--skip-bad-images``, which only the Pillow workers can do), else ``pillow``."""
    return "dali" if gpu and not args.skip_bad_images and dali_importable() else "pillow"


def make_loader(
    samples: list[Sample], args: argparse.Namespace, rank: int, world: int, *, train: bool, pin: bool
) -> DataLoader[Any] | DaliLoader:
    """The loader of one split for one rank: its shard, ``args.loader_workers`` workers, prefetching;
    DALI's where ``decoder`` says so (``pin``: the rank runs on a GPU), else Pillow in DataLoader workers."""
    if decoder(args, gpu=pin) == "dali":
        return DaliLoader(args.data, "train" if train else "val", args, rank, world, train=train)
    dataset = ImageFolder(samples, args.image_size, train=train)
    sampler: Sampler[int] = (
        DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0, drop_last=True)
        if train
        else Shard(len(dataset), rank, world)
    )
    workers = args.loader_workers
    return DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=workers,
        collate_fn=collate,
        pin_memory=pin,
        drop_last=train,
        persistent_workers=workers > 0,
        prefetch_factor=PREFETCH if workers > 0 else None,
    )


def check_bad(batch: Decoded, skip: bool) -> int:
    """How many files of ``batch`` did not decode; SystemExit naming the first unless ``skip``."""
    if batch.bad and not skip:
        first = batch.bad[0]
        raise SystemExit(
            f"resnet50_bench: {first.path}: not a readable image ({first.reason}). Fix: replace or remove the "
            "file, or pass --skip-bad-images (run.skip_bad_images) to leave such files out and count them."
        )
    return len(batch.bad)


def to_device(
    batch: Decoded, device: torch.device, memory_format: torch.memory_format
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch on ``device``: images normalised to float32 with ImageNet's mean and deviation."""
    images = batch.images.to(device, non_blocking=True).float().div_(255.0)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    images = images.sub_(mean).div_(std).contiguous(memory_format=memory_format)
    return images, batch.labels.to(device, non_blocking=True)


def measure_loader(loader: DataLoader[Any] | DaliLoader, batches: int, skip: bool) -> tuple[int, float, int]:
    """Read up to ``batches`` batches (the loader's epoch at most): (images, seconds, bad files).

    The clock starts at the first batch, so the workers' start-up is not counted against the rate.
    """
    iterator = iter(loader)
    first = next(iterator)
    bad = check_bad(first, skip)
    start, images = time.perf_counter(), 0
    for _, batch in zip(range(batches - 1), iterator, strict=False):
        bad += check_bad(batch, skip)
        images += len(batch.labels)
    return images, time.perf_counter() - start, bad


def loader_line(
    rank: int, workers: int, images: int, seconds: float, bad: int, pipeline: str = "pillow"
) -> str:
    """The line a rank prints after measuring its loader alone (``pipeline``: ``decoder``'s answer)."""
    rate = images / seconds if seconds > 0 else 0.0
    facts = {
        "decoder": pipeline,
        "rank": rank,
        "host": socket.gethostname(),
        "workers": workers,
        "images": images,
        "seconds": round(seconds, 6),
        "images_per_sec": round(rate, 3),
        "images_per_sec_per_worker": round(rate / max(workers, 1), 3),
        "skipped_images": bad,
    }
    return LOADER_PREFIX + json.dumps(facts, sort_keys=True)
