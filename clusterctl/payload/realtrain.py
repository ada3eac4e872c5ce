"""Training on real data: batches from the input pipeline, the learning-rate schedule, evaluation on
val after each epoch on every rank at once, and time to accuracy.

Shipped beside ``resnet50_bench.py``, imported by it as a sibling only when ``--data`` is given; it
imports torch, its siblings and the standard library, never clusterctl.

The schedule is Goyal et al.'s ("Accurate, Large Minibatch SGD", 2017): the learning rate is
``base_lr x global batch / 256``, reached by a linear warm-up over ``--warmup-epochs`` from the rate one
device alone would use. Evaluation shards val over every rank (not rank 0 alone: the sequential
validation phase bounds a whole run's scaling) and all-reduces the correct and total counts.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload import imagedata
    from clusterctl.payload.dataopts import default_workers
    from clusterctl.payload.emit import emit_line
else:
    import imagedata
    from dataopts import default_workers
    from emit import emit_line


def learning_rate(step: int, steps_per_epoch: int, args: argparse.Namespace, world: int) -> float:
    """The rate at global step ``step`` (from 0): linear warm-up to ``base_lr x global batch / 256``."""
    peak = args.base_lr * args.batch_size * world / 256
    warmup = args.warmup_epochs * steps_per_epoch
    if warmup <= 0 or step >= warmup:
        return peak
    start = peak / world
    return start + (peak - start) * step / warmup


class Feeder:
    """The training batches of one rank, epoch after epoch, with the learning rate set for each step."""

    def __init__(
        self, samples: list[Any], args: argparse.Namespace, trainer: Any, optimizer: Any, memory_format: Any
    ):
        self.loader = imagedata.make_loader(
            samples, args, trainer.rank, trainer.world_size, train=True, pin=trainer.device.type == "cuda"
        )
        if len(self.loader) == 0:
            raise SystemExit(
                f"resnet50_bench: --data {args.data}: train/ has fewer images than one batch per rank "
                f"({args.batch_size} x {trainer.world_size}). Fix: a larger dataset or a smaller --batch-size."
            )
        self.args, self.trainer, self.optimizer, self.memory_format = args, trainer, optimizer, memory_format
        self.epoch, self.step, self.skipped = 0, 0, 0
        self._iterator = self._start(0)

    def _start(self, epoch: int) -> Any:
        self.loader.sampler.set_epoch(epoch)  # type: ignore[union-attr]  # DistributedSampler or DALI's
        return iter(self.loader)

    def next_epoch(self) -> None:
        """Start the next epoch (its own shuffle)."""
        self.epoch += 1
        self._iterator = self._start(self.epoch)

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The next batch on the device, the learning rate set for it; None at the end of the epoch."""
        batch = next(self._iterator, None)
        if batch is None:
            return None
        self.skipped += imagedata.check_bad(batch, self.args.skip_bad_images)
        lr = learning_rate(self.step, len(self.loader), self.args, self.trainer.world_size)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.step += 1
        return imagedata.to_device(batch, self.trainer.device, self.memory_format)

    def endless(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch, starting a new epoch where one ends (step-count runs)."""
        batch = self()
        if batch is None:
            self.next_epoch()
            batch = self()
        assert batch is not None  # a fresh epoch has at least one batch (checked at construction)
        return batch


def evaluate(
    model: Any, loader: Any, args: argparse.Namespace, trainer: Any, memory_format: Any, autocast: Any
) -> tuple[float, int]:
    """Top-1 on val over every rank's shard at once, and the number of images it counted."""
    model.eval()
    correct = total = skipped = 0
    with torch.no_grad():
        for batch in loader:
            skipped += imagedata.check_bad(batch, args.skip_bad_images)
            if len(batch.labels) == 0:
                continue
            images, labels = imagedata.to_device(batch, trainer.device, memory_format)
            with autocast:
                predicted = model(images).argmax(dim=1)
            correct += int((predicted == labels).sum())
            total += len(labels)
    model.train()
    correct_all, total_all = trainer.sum_all([float(correct), float(total)])
    return (correct_all / total_all if total_all else 0.0), int(total_all)


def train_epochs(
    args: argparse.Namespace,
    trainer: Any,
    model: Any,
    feeder: Feeder,
    val: list[Any],
    train_step: Callable[[], bool],
    sync: Callable[[], None],
    memory_format: Any,
    autocast: Any,
) -> dict[str, Any]:
    """``args.epochs`` epochs, val top-1 after each, stopping at the first epoch that reaches
    ``args.target_top1``; the figures for the result line.

    ``train_step()`` runs one step and returns False when the epoch has no batch left. Every rank
    takes the same number of steps (``DistributedSampler`` drops the remainder), so no rank waits
    on an allreduce another never joins.
    """
    loader = imagedata.make_loader(
        val, args, trainer.rank, trainer.world_size, train=False, pin=trainer.device.type == "cuda"
    )
    history, reached, train_seconds, images = [], None, 0.0, 0
    trainer.barrier()
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        sync()
        began, steps = time.perf_counter(), 0
        while train_step():
            steps += 1
        sync()
        epoch_seconds = trainer.slowest(time.perf_counter() - began)
        train_seconds += epoch_seconds
        images += steps * args.batch_size * trainer.world_size
        top1, counted = evaluate(model, loader, args, trainer, memory_format, autocast)
        wall = time.perf_counter() - start
        history.append({
            "epoch": epoch, "top1": round(top1, 4), "val_images": counted, "train_seconds": round(epoch_seconds, 3),
            "wall_seconds": round(wall, 3), "steps": steps,
        })  # fmt: skip
        if trainer.rank == 0:
            print(
                f"Epoch {epoch}/{args.epochs}: top-1 {top1:.4f} on {counted} val images, {wall:.1f} s",
                flush=True,
            )
        if reached is None and args.target_top1 is not None and top1 >= args.target_top1:
            reached = (epoch, wall)
            break  # every rank read the same all-reduced top-1: all stop here together
        if epoch < args.epochs:
            feeder.next_epoch()
    return {
        "epochs": history,
        "trained_images": images,
        "train_seconds": round(train_seconds, 6),
        "top1": history[-1]["top1"] if history else None,
        "target_top1": args.target_top1,
        "target_epoch": reached[0] if reached else None,
        "time_to_target_s": round(reached[1], 3) if reached else None,
    }


def open_dataset(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The train and val samples of ``args.data``; sets the class count and the workers' default."""
    train, val, classes = imagedata.scan_dataset(args.data)
    args.num_classes = len(classes)
    if args.loader_workers is None:
        args.loader_workers = default_workers()
    return train, val


def loader_rate(samples: list[Any], args: argparse.Namespace, trainer: Any, batches: int) -> dict[str, Any]:
    """The input pipeline alone on every rank (no model): this rank's ``CLUSTERCTL_LOADER`` line printed,
    the sum over ranks returned (images/s, and per worker)."""
    loader = imagedata.make_loader(
        samples, args, trainer.rank, trainer.world_size, train=True, pin=trainer.device.type == "cuda"
    )
    if len(loader) == 0:
        raise SystemExit(
            f"resnet50_bench: --data {args.data}: train/ has fewer images than one batch per rank "
            f"({args.batch_size} x {trainer.world_size}). Fix: a larger dataset or a smaller --batch-size."
        )
    trainer.barrier()
    images, seconds, bad = imagedata.measure_loader(
        loader, max(2, min(batches, len(loader))), args.skip_bad_images
    )
    pipeline = imagedata.decoder(args, gpu=trainer.device.type == "cuda")
    emit_line(imagedata.loader_line(trainer.rank, args.loader_workers, images, seconds, bad, pipeline))
    rate, skipped = trainer.sum_all([images / seconds if seconds > 0 else 0.0, float(bad)])
    return {
        "decoder": pipeline,
        "loader_images_per_sec": round(rate, 3),
        "loader_images_per_sec_per_worker": round(rate / max(1, args.loader_workers * trainer.world_size), 3),
        "loader_workers": args.loader_workers,
        "loader_skipped_images": int(skipped),
    }


def loader_only(args: argparse.Namespace, trainer: Any, samples: list[Any], prefix: str, model: str) -> int:
    """``--loader-only``: the pipeline alone over ``--steps`` batches per rank; rank 0 prints the result line."""
    facts = loader_rate(samples, args, trainer, args.steps)
    if trainer.rank == 0:
        rate = facts["loader_images_per_sec"]
        result = {
            "model": model, "framework": args.framework, "loader_only": True, "data": args.data,
            "total_images_per_sec": rate, "images_per_sec_per_device": round(rate / trainer.world_size, 3),
            "batch_size": args.batch_size, "world_size": trainer.world_size, "precision": args.precision,
            "image_size": args.image_size, "steps": args.steps, **facts,
        }  # fmt: skip
        emit_line(prefix + json.dumps(result, sort_keys=True))
    trainer.shutdown()
    return 0


class RealData:
    """A real-data run's batches (``Feeder``), its loader's own rate, and its epochs."""

    def __init__(
        self, args: argparse.Namespace, trainer: Any, optimizer: Any, memory_format: Any, train: list[Any]
    ):
        self.args, self.trainer, self.memory_format, self.train = args, trainer, memory_format, train
        self.feeder = Feeder(train, args, trainer, optimizer, memory_format)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The next batch; with ``--epochs`` None at an epoch's end, else the next epoch's first."""
        return self.feeder() if self.args.epochs else self.feeder.endless()

    def loader_rate(self) -> dict[str, Any]:
        """The pipeline alone, before training, over as many batches as the run measures (at most 20)."""
        return loader_rate(self.train, self.args, self.trainer, min(self.args.steps, 20))

    def epochs(
        self,
        model: Any,
        val: list[Any],
        train_step: Callable[[], bool],
        sync: Callable[[], None],
        autocast: Any,
    ) -> dict[str, Any]:
        """``train_epochs`` with this run's feeder."""
        return train_epochs(
            self.args, self.trainer, model, self.feeder, val, train_step, sync, self.memory_format, autocast
        )


def input_facts(
    args: argparse.Namespace,
    facts: dict[str, Any],
    durations: dict[str, list[float]],
    seconds: float,
    world: int,
) -> dict[str, Any]:
    """The training rate beside the loader's, the share of step time spent on input, and the verdict."""
    training = args.batch_size * world * args.steps / seconds if seconds > 0 else 0.0
    share = input_share(durations)
    return {
        "input_share": round(share, 4) if share is not None else None,
        "input_bound": input_verdict(facts["loader_images_per_sec"], training, share),
    }


def input_share(durations: dict[str, list[float]]) -> float | None:
    """The fraction of the measured steps' time spent waiting for input; None without steps."""
    step = sum(durations["step"])
    return sum(durations["input"]) / step if step > 0 else None


def input_verdict(loader: float, training: float, share: float | None) -> bool:
    """Input-bound: training waited on input more than a tenth of its steps, or the pipeline alone is
    no faster than training (with a 10 % margin)."""
    return (share is not None and share > 0.1) or loader < 1.1 * training
