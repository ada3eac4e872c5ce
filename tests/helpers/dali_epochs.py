"""Run by tests/test_dali_cpu.py in a process of its own (DALI's threads and libraries stay out of the
test session): the payload's DALI loader (``clusterctl.payload.dalidata``) on DALI's CPU backend, for
every rank of a world, two epochs of each split. Each image of the synthesized set is one flat colour
that names it (``identity``), so what each batch holds is read back from the decoded pixels.

Usage: python dali_epochs.py DALI_DIR ROOT WORLD BATCH SIZE  (prints one JSON document)
"""

from __future__ import annotations

import argparse
import json
import sys


def identity(red: int, green: int) -> int:
    """The image number a flat colour encodes (``colour`` in the test: 16 steps per channel)."""
    return round((red - 8) / 16) + 16 * round((green - 8) / 16)


def main() -> None:
    dali_dir, root, world, batch, size = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    sys.path.append(dali_dir)  # after .venv's site-packages: its torch, numpy and the rest come first
    from clusterctl.payload.dalidata import DaliLoader

    args = argparse.Namespace(image_size=size, batch_size=batch, loader_workers=1)
    out: dict[str, list[dict[str, object]]] = {}
    for split in ("train", "val"):
        out[split] = []
        for rank in range(world):
            loader = DaliLoader(root, split, args, rank, world, train=split == "train", cpu=True)
            epochs = []
            for _ in range(2):
                seen = []
                for batch_ in loader:
                    images, labels = batch_.images, batch_.labels
                    assert images.dtype.is_floating_point is False and tuple(images.shape[1:]) == (
                        3,
                        size,
                        size,
                    )
                    centre = images[:, :, size // 2, size // 2].tolist()
                    seen += [
                        [identity(r, g), int(label)]
                        for (r, g, _), label in zip(centre, labels.tolist(), strict=True)
                    ]
                epochs.append(seen)
            out[split].append({"batches": len(loader), "epochs": epochs, "device": str(images.device)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
