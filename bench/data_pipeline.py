"""Print how fast `data synth` renders images and how fast the payload's input pipeline reads them, on
this machine, per core.

1. ``data synth``'s rendering (``clusterctl.data.synth.render_all``: numpy + Pillow's JPEG encoder), one
   process: images/s, which is images/s per core.
2. The payload's pipeline (``clusterctl/payload/imagedata.py``: Pillow decode, RandomResizedCrop, flip,
   uint8 batches) over those files, for each worker count: images/s and images/s per worker, the clock
   started at the first batch (as ``--loader-only`` does).

    python bench/data_pipeline.py [--images 400] [--width 400 --height 350] [--workers 1,2] [--json FILE]

The default size is ImageNet's mean (~400x350, ~100 KB JPEGs); the crop is 224 px.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "clusterctl" / "payload")]

from clusterctl.data.synth import SynthSpec, render_all  # noqa: E402


def render(spec: SynthSpec, into: Path) -> dict[str, float]:
    """Render ``spec`` into ``into``: images/s (one process) and the mean file size."""
    start, total, count = time.perf_counter(), 0, 0
    for file, data in render_all(spec):
        path = into / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        total, count = total + len(data), count + 1
    seconds = time.perf_counter() - start
    return {"images": count, "seconds": round(seconds, 3), "images_per_sec": round(count / seconds, 2),
            "mean_kb": round(total / count / 1e3, 1)}  # fmt: skip


def read(root: Path, workers: int, image_size: int, batch: int) -> dict[str, float]:
    """One pass of the payload's training pipeline over ``root`` with ``workers`` workers."""
    import imagedata

    train, _, _ = imagedata.scan_dataset(str(root))
    args = argparse.Namespace(image_size=image_size, batch_size=batch, loader_workers=workers)
    loader = imagedata.make_loader(train, args, 0, 1, train=True, pin=False)
    images, seconds, _ = imagedata.measure_loader(loader, len(loader), skip=False)
    rate = images / seconds
    return {"workers": workers, "images": images, "images_per_sec": round(rate, 2),
            "images_per_sec_per_worker": round(rate / max(workers, 1), 2)}  # fmt: skip


def main() -> int:
    """Measure, print a table, optionally keep the figures as JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=400, help="training images (val: a fifth of it)")
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--width", type=int, default=400)
    p.add_argument("--height", type=int, default=350)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    per_class = max(1, args.images // args.classes)
    spec = SynthSpec(args.classes, per_class, max(1, per_class // 5), args.width, args.height)
    with tempfile.TemporaryDirectory(prefix="clusterctl-bench-data-") as tmp:
        synth = render(spec, Path(tmp))
        print(f"data synth: {synth['images_per_sec']} img/s per core ({synth['images']} images, "
              f"mean {synth['mean_kb']} KB at {args.width}x{args.height})")  # fmt: skip
        pipeline = []
        for workers in (int(w) for w in args.workers.split(",")):
            figures = read(Path(tmp), workers, args.image_size, args.batch_size)
            pipeline.append(figures)
            print(f"pipeline, {workers} worker(s): {figures['images_per_sec']} img/s, "
                  f"{figures['images_per_sec_per_worker']} img/s per worker")  # fmt: skip
    if args.json:
        machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()}
        args.json.write_text(json.dumps({"synth": synth, "pipeline": pipeline, "machine": machine}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
