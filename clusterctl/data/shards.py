"""`data synth --tfrecords N`: the TFRecord shards written beside the JPEGs, piece by piece into local
files while the images are rendered (a shard of ImageNet is ~140 MB: never held in memory whole), then
added to the archive with their listing lines."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from typing import BinaryIO

from clusterctl.data.synth import SynthFile, SynthSpec, listing_entry
from clusterctl.data.tfrecord import frame, image_example, shard_of


class ShardWriter:
    """The shards of ``spec`` under the local directory ``into``, opened as the first image reaches each."""

    def __init__(self, spec: SynthSpec, into: Path) -> None:
        self._spec, self._into = spec, into
        self._open: dict[str, tuple[BinaryIO, hashlib._Hash]] = {}
        self._sizes: dict[str, int] = {}

    def add(self, file: SynthFile, jpeg: bytes) -> None:
        """Append ``file``'s record to its shard (nothing when the spec asks for no shards)."""
        spec = self._spec
        if not spec.tfrecord_shards:
            return
        ordinal = file.label * spec.per_class(file.split) + file.index
        path = shard_of(file.split, ordinal, spec.tfrecord_shards)
        if path not in self._open:
            local = self._into / path
            local.parent.mkdir(parents=True, exist_ok=True)
            self._open[path] = (local.open("wb"), hashlib.sha256())
            self._sizes[path] = 0
        name = file.path.rsplit("/", 1)[-1]
        record = frame(
            image_example(jpeg, label=file.label, synset=spec.class_name(file.label), filename=name,
                          width=spec.width, height=spec.height)
        )  # fmt: skip
        out, digest = self._open[path]
        out.write(record)
        digest.update(record)
        self._sizes[path] += len(record)

    def close_into(self, tar: tarfile.TarFile) -> list[str]:
        """Close every shard, add it to ``tar`` (0644, dated 0, like the JPEGs) in name order, and return
        their listing lines."""
        lines = []
        for path in sorted(self._open):
            out, digest = self._open[path]
            out.close()
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = self._sizes[path], 0o644, 0
            with (self._into / path).open("rb") as data:
                tar.addfile(info, data)
            lines.append(listing_entry(path, self._sizes[path], digest.hexdigest()))
        self._open.clear()
        return lines
