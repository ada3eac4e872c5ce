"""TFRecord shards of `data synth`'s images for the paper image's ``tf_cnn_benchmarks --data_dir`` (pure).

No TensorFlow or protobuf package is needed: a ``tf.train.Example`` is a small protobuf written here by
hand, and a TFRecord file is a sequence of framed records (the TFRecord format, tensorflow/docs
site/en/tutorials/load_data/tfrecord.ipynb, "TFRecords format details")::

    uint64 length                       (little-endian)
    uint32 masked_crc32c(length)
    byte   data[length]
    uint32 masked_crc32c(data)
    masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8

The features are those of ImageNet's ``build_imagenet_data.py``, of which tf_cnn_benchmarks'
``preprocessing.parse_example_proto`` (tensorflow/benchmarks scripts/tf_cnn_benchmarks/preprocessing.py)
reads ``image/encoded`` (bytes), ``image/class/label`` (int64; 1-based, 0 being the background class of
its 1001) and ``image/class/text`` (bytes), and the optional ``image/object/bbox/*`` floats (left out:
with none, the whole image is the box). Its ``tf_record_pattern`` globs ``<data_dir>/<subset>-*-of-*``
with the subsets ``train`` and ``validation``, hence the shard names ``train-00000-of-00008``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

FeatureValue = Sequence[bytes] | Sequence[int] | Sequence[float]
SUBSETS = {"train": "train", "val": "validation"}
"""`data synth`'s split → the subset name tf_cnn_benchmarks globs for."""
SHARDS_DIR = "tfrecords"
"""Where the shards go under the dataset's directory: ``--data_dir=<run.data>/tfrecords``."""


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli, reflected
        table.append(crc)
    return tuple(table)


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """The CRC-32C (Castagnoli) of ``data``, as RFC 3720 section B.4 defines it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (rotated right by 15 bits, plus a constant)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One TFRecord record holding ``data``: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its two's complement: ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(values: FeatureValue) -> bytes:
    """A ``tf.train.Feature``: bytes_list (1), float_list (2) or int64_list (3), the numbers packed."""
    if all(isinstance(v, bytes) for v in values):
        return _field(1, b"".join(_field(1, v) for v in values))  # type: ignore[arg-type]  # bytes, checked
    if all(isinstance(v, int) for v in values):
        return _field(3, _field(1, b"".join(_varint(v) for v in values)))  # type: ignore[arg-type]
    return _field(2, _field(1, b"".join(struct.pack("<f", v) for v in values)))


def example(features: Sequence[tuple[str, FeatureValue]]) -> bytes:
    """A serialized ``tf.train.Example`` of ``features`` (name, values), its map entries in that order."""
    entries = b"".join(_field(1, _field(1, name.encode()) + _field(2, _feature(v))) for name, v in features)
    return _field(1, entries)


def image_example(jpeg: bytes, *, label: int, synset: str, filename: str, width: int, height: int) -> bytes:
    """The ``tf.train.Example`` of one image as ImageNet's TFRecords hold it; ``label`` is 0-based here
    and written 1-based (``image/class/label``), as the Inception preprocessing expects."""
    return example([
        ("image/height", [height]),
        ("image/width", [width]),
        ("image/colorspace", [b"RGB"]),
        ("image/channels", [3]),
        ("image/class/label", [label + 1]),
        ("image/class/synset", [synset.encode()]),
        ("image/class/text", [synset.encode()]),
        ("image/format", [b"JPEG"]),
        ("image/filename", [filename.encode()]),
        ("image/encoded", [jpeg]),
    ])  # fmt: skip


def shard_path(split: str, index: int, shards: int) -> str:
    """The shard's path under the dataset directory: ``tfrecords/train-00003-of-00008``."""
    return f"{SHARDS_DIR}/{SUBSETS[split]}-{index:05d}-of-{shards:05d}"


def validation_shards(train_shards: int) -> int:
    """Validation shards for ``train_shards`` training shards: one eighth, as ImageNet's 1024 and 128."""
    return max(1, train_shards // 8)


def shard_of(split: str, ordinal: int, train_shards: int) -> str:
    """The shard the ``ordinal``-th image of ``split`` goes to: round robin, so every shard holds every
    class (the images come class by class)."""
    count = train_shards if split == "train" else validation_shards(train_shards)
    return shard_path(split, ordinal % count, count)
