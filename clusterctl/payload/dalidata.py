"""NVIDIA DALI as the resnet50 payload's input pipeline on GPUs, where the image has it (the modern profile).

Shipped beside ``imagedata.py``, which uses it in place of its Pillow DataLoader when ``nvidia.dali``
imports and the rank runs on a GPU; it imports only torch, DALI and the standard library, never
clusterctl. The pipeline reads the rank's shard of ``<root>/<split>/<class>/*`` with DALI's file reader
(labels: the class directories sorted by name, as ``imagedata.scan_dataset`` numbers them), decodes on
the GPU (the "mixed" decoder: nvJPEG; on the CPU where no GPU is given, which is how the suite runs this
same pipeline on a machine without one), and for training crops at random (area 0.08-1, aspect ratio
3/4-4/3, as RandomResizedCrop), resizes and flips half the images; validation resizes the shorter side
to 256/224 of the size and crops the centre. Batches come out as the Pillow loader's: uint8 NCHW images
(on the GPU already) and their labels, so normalising and training do not change.

Sharding is DALI's, not DistributedSampler's: rank r reads the contiguous r-th of the sorted file list
(the Pillow path takes every world-th file; with shuffling, of the list DALI permutes once with a fixed
seed, so the ranks' shards stay disjoint), training shards move on by one each epoch (the reader's
default), and a training shard's last partial batch is dropped, as the Pillow loader drops it; a
validation rank keeps its shard, read in file order, so every validation epoch reads every image once
over all ranks, the last batch partial.

A file DALI cannot decode stops the run (DALI raises); ``--skip-bad-images`` needs the Pillow loader,
which ``imagedata.make_loader`` then keeps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

DECODER = "dali"


def dali_importable() -> bool:
    """Whether ``nvidia.dali`` and its PyTorch plugin import here."""
    try:
        import nvidia.dali.plugin.pytorch  # noqa: F401  # the import is the test (nvidia.dali with it)
    except ImportError:
        return False
    return True


class _NoSampler:
    """What the Feeder's ``loader.sampler.set_epoch`` reaches: DALI's reader shuffles each epoch itself."""

    def set_epoch(self, epoch: int) -> None:
        """Nothing to do: the reader's own shuffle changes every epoch."""
        del epoch


class DaliBatch(NamedTuple):
    """A batch as ``imagedata.Batch`` holds one: uint8 NCHW images, labels, no undecodable files."""

    images: torch.Tensor
    labels: torch.Tensor
    bad: list[Any]


def _pipeline(
    root: str, size: int, train: bool, batch: int, workers: int, rank: int, world: int, device: int | None
) -> Any:
    """The DALI pipeline of one split for one rank (built, not yet run); on GPU ``device``, or on the
    CPU when it is None (DALI's CPU decoder: the same reader, crops and resizes, batches in host memory)."""
    from nvidia.dali import fn, pipeline_def, types

    decode_on = "cpu" if device is None else "mixed"

    @pipeline_def(batch_size=batch, num_threads=max(1, workers), device_id=device, seed=rank)
    def pipe() -> Any:
        # A validation rank keeps its shard (stick_to_shard) and starts it afresh each epoch
        # (pad_last_batch: the padding, which the iterator drops, repeats the shard's last image
        # instead of reading on). By default the reader moves every rank on to the next shard each
        # epoch, and where the shards differ in size a second validation epoch then read one image
        # twice and another not at all (tests/test_dali_cpu.py).
        jpegs, labels = fn.readers.file(
            file_root=root, shard_id=rank, num_shards=world, random_shuffle=train, stick_to_shard=not train,
            pad_last_batch=not train, name="reader",
        )  # fmt: skip
        if train:
            images = fn.decoders.image_random_crop(
                jpegs, device=decode_on, output_type=types.RGB, random_area=[0.08, 1.0],
                random_aspect_ratio=[3 / 4, 4 / 3],
            )  # fmt: skip
            images = fn.resize(images, resize_x=size, resize_y=size)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(jpegs, device=decode_on, output_type=types.RGB)
            images = fn.resize(images, resize_shorter=round(size * 256 / 224))
            mirror = 0
        images = fn.crop_mirror_normalize(
            images, dtype=types.UINT8, output_layout="CHW", crop=(size, size), mirror=mirror
        )
        return images, (labels if device is None else labels.gpu())

    return pipe()


class DaliLoader:
    """One rank's batches of ``<root>/<split>`` through DALI: iterable epoch after epoch, with a length
    (batches per epoch) and a ``sampler`` like a DataLoader's. On the current GPU, or on the CPU with
    ``cpu`` (the suite's check of this pipeline where there is no GPU)."""

    def __init__(
        self, root: str, split: str, args: Any, rank: int, world: int, *, train: bool, cpu: bool = False
    ):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        device = None if cpu else torch.cuda.current_device()
        pipe = _pipeline(
            os.path.join(root, split), args.image_size, train, args.batch_size, args.loader_workers, rank,
            world, device,
        )  # fmt: skip
        pipe.build()
        policy = LastBatchPolicy.DROP if train else LastBatchPolicy.PARTIAL
        self._iterator = DALIGenericIterator(
            [pipe], ["images", "labels"], reader_name="reader", last_batch_policy=policy, auto_reset=True
        )
        self.sampler = _NoSampler()

    def __len__(self) -> int:
        return len(self._iterator)

    def __iter__(self) -> Iterator[DaliBatch]:
        for (out,) in self._iterator:
            yield DaliBatch(out["images"], out["labels"].view(-1).long(), [])
