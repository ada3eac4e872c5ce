"""A learnable ImageNet-layout dataset, made from a seed: the images and their listing (pure).

``train/<class>/*.JPEG`` and ``val/<class>/*.JPEG``, as ILSVRC 2012 is laid out, so the payload's input
pipeline reads it exactly as it would read ImageNet. Each class has its own visual signature (a hue and
a stripe orientation and frequency); every image draws its own brightness, phase, jitter and noise
around it, so a short training run learns the classes while no two images are the same. The bytes
depend only on the spec (seed included) and Pillow's JPEG encoder: the same spec gives the same files.

ImageNet's JPEGs average about 110 KB at about 400x350; the default size and quality come near that,
and tests ask for small images.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image

# The manifest `data synth` writes last into the dataset's directory: what it wrote, and its digest.
MANIFEST_NAME = ".clusterctl-dataset.json"
# Beside it, the paths `data synth` wrote, one a line: a later synth removes exactly those (ImageNet's
# 1.3 M paths would make the manifest itself tens of MB).
LISTING_NAME = ".clusterctl-dataset.files"
SPLITS = ("train", "val")
# A listing line's fields are separated by tabs; class names and file names never hold one.
_EXTENSION = ".JPEG"
# The incomplete manifest's digest: never equal to a real one, so the next synth rewrites the node, and
# a run refuses the directory (it is being written, or its write was interrupted).
INCOMPLETE = "incomplete"
# Every path `data synth` writes (``plan_files``, ``tfrecord.shard_path``), as a POSIX extended regular
# expression: `grep -xE` checks a node's listing with it before a listed file is removed, and
# ``listed_path_ok`` here. No `..`, no absolute path, nothing but the dataset's own layout.
LISTED_PATH = (
    r"(train|val)/n[0-9]{8,}/n[0-9]{8,}_(train|val)_[0-9]{6,}\.JPEG"
    r"|tfrecords/(train|validation)-[0-9]{5,}-of-[0-9]{5,}"
)


@dataclass(frozen=True)
class SynthSpec:
    """What `data synth` makes: classes x images per class, their size, JPEG quality and the seed."""

    classes: int = 10
    train_per_class: int = 100
    val_per_class: int = 20
    width: int = 400
    height: int = 350
    quality: int = 93
    seed: int = 0
    tfrecord_shards: int = 0
    """Training TFRecord shards of the same images for tf_cnn_benchmarks (validation: an eighth); 0: none."""

    def class_name(self, index: int) -> str:
        """ImageNet-style synset name of class ``index`` (``n00000000``, ``n00000001``, ...)."""
        return f"n{index:08d}"

    def count(self) -> int:
        """How many images the spec makes (both splits)."""
        return self.classes * (self.train_per_class + self.val_per_class)

    def per_class(self, split: str) -> int:
        """Images per class in ``split``."""
        return self.train_per_class if split == "train" else self.val_per_class


@dataclass(frozen=True)
class SynthFile:
    """One image to write: its path under the dataset directory, class index and ordinal in its class."""

    path: str
    split: str
    label: int
    index: int


def plan_files(spec: SynthSpec) -> list[SynthFile]:
    """Every image of ``spec``, train then val, class by class, in the order they are written."""
    files = []
    for split in SPLITS:
        per_class = spec.per_class(split)
        for label in range(spec.classes):
            name = spec.class_name(label)
            files += [
                SynthFile(f"{split}/{name}/{name}_{split}_{i:06d}{_EXTENSION}", split, label, i)
                for i in range(per_class)
            ]
    return files


def _signature(spec: SynthSpec, label: int) -> tuple[np.ndarray, float, float]:
    """Class ``label``'s colour (RGB in 0..1), stripe angle (radians) and stripe frequency (cycles per image).

    Hues are spread evenly around the colour wheel; angles and frequencies are spread too, so
    neighbouring hues still differ in texture.
    """
    hue = label / spec.classes
    rgb = np.array([0.5 + 0.5 * math.cos(2 * math.pi * (hue + k / 3)) for k in range(3)])
    angle = math.pi * ((label * 0.381966) % 1.0)  # golden-ratio steps: no two classes share an angle
    frequency = 3.0 + (label % 5) * 2.0
    return rgb, angle, frequency


def render_image(spec: SynthSpec, file: SynthFile) -> bytes:
    """The JPEG bytes of ``file``: its class's signature with this image's own variation."""
    seed = [spec.seed, SPLITS.index(file.split), file.label, file.index]
    rng = np.random.default_rng(seed)
    rgb, angle, frequency = _signature(spec, file.label)
    ys, xs = np.mgrid[0 : spec.height, 0 : spec.width].astype(np.float32)
    side = max(spec.width, spec.height)
    angle += rng.normal(0, 0.08)
    along = (xs * math.cos(angle) + ys * math.sin(angle)) / side
    stripes = 0.5 + 0.5 * np.sin(2 * math.pi * frequency * along + rng.uniform(0, 2 * math.pi))
    brightness = rng.uniform(0.6, 1.0)
    base = rgb[None, None, :] * (0.55 + 0.45 * stripes[..., None]) * brightness
    noise = rng.normal(0.0, 0.16, size=(spec.height, spec.width, 3))
    pixels = np.clip((base + noise) * 255.0, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, "JPEG", quality=spec.quality)
    return out.getvalue()


def render_all(spec: SynthSpec) -> Iterator[tuple[SynthFile, bytes]]:
    """Every file of ``spec`` with its bytes, in ``plan_files`` order."""
    for file in plan_files(spec):
        yield file, render_image(spec, file)


@dataclass(frozen=True)
class Manifest:
    """What a dataset directory holds: the spec it was made from, its files' count and bytes, and the
    digest of the listing (each file's path, size and SHA-256); two nodes hold the same dataset exactly
    when their digests are equal."""

    spec: SynthSpec
    files: int
    bytes: int
    digest: str

    def to_json(self) -> str:
        """The manifest file's text."""
        data = asdict(self)
        data["written_by"] = "clusterctl data synth"
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


def listing_line(path: str, data: bytes) -> str:
    """One line of a manifest's listing: path, size and SHA-256 of the file's bytes, tab separated."""
    return listing_entry(path, len(data), hashlib.sha256(data).hexdigest())


def listing_entry(path: str, size: int, sha256: str) -> str:
    """A listing line from a file's size and SHA-256 (a file written piece by piece, as a TFRecord shard)."""
    return f"{path}\t{size}\t{sha256}"


def make_manifest(spec: SynthSpec, lines: list[str]) -> Manifest:
    """The manifest of the files whose ``listing_line`` s are ``lines``."""
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    total = sum(int(line.split("\t")[1]) for line in lines)
    return Manifest(spec, len(lines), total, digest)


def read_manifest(text: str) -> Manifest | None:
    """The manifest in ``text``, or None when it is not one `data synth` wrote (or not JSON at all)."""
    try:
        data = json.loads(text)
        spec = SynthSpec(**data["spec"])
        return Manifest(spec, int(data["files"]), int(data["bytes"]), str(data["digest"]))
    except (ValueError, KeyError, TypeError):
        return None


def listed_path_ok(path: str) -> bool:
    """Whether ``path`` (a line of a node's listing) is one `data synth` writes: inside the dataset, in
    its layout. A later synth removes only such paths."""
    return re.fullmatch(LISTED_PATH, path) is not None
