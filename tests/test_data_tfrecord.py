"""`data synth --tfrecords`: CRC-32C and TFRecord's mask against published vectors, the hand-written
``tf.train.Example`` against bytes TensorFlow itself serialized, the shards of a rendered archive read
back record by record (framing, CRCs, the JPEG and the 1-based label of every image), the probe that
finds them on a node (a real shell), and tf_cnn_benchmarks reading them through run.data."""

from __future__ import annotations

import ast
import fnmatch
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from clusterctl.data.deliver import render_archive
from clusterctl.data.probe import parse_probe, probe_command
from clusterctl.data.synth import SynthSpec, plan_files
from clusterctl.data.tfrecord import crc32c, example, frame, masked_crc32c
from clusterctl.inventory import RunDefaults
from clusterctl.workloads.resnet50 import ResNet50
from clusterctl.workloads.tf_cnn_benchmarks import TfCnnBenchmarks

FIXTURES = Path(__file__).parent / "fixtures" / "tfrecord"


def test_crc32c_gives_rfc3720s_results() -> None:
    # RFC 3720 section B.4, as tensorflow/core/lib/hash/crc32c_test.cc (TEST(CRC, StandardResults)) checks
    # them; 0xe3069283: CRC-32C's check value of "123456789" (the CRC catalogue).
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    assert crc32c(b"123456789") == 0xE3069283


def test_the_mask_gives_a_published_tfrecord_value() -> None:
    # SunDoge/tfrecord-slow's test of src/tfrecord_slow/utils/masked_crc.py: IN_BUF -> OUT_INT.
    assert masked_crc32c(b"1234567890asdfghjkl") == 4134599430


@pytest.mark.parametrize(
    ("fixture", "features"),
    [
        ("tf1-goat.pyrepr", [("feature0", [0]), ("feature1", [4]), ("feature2", [b"goat"]), ("feature3", [0.9876])]),
        ("tf2-horse.pyrepr", [("feature2", [b"horse"]), ("feature1", [3]), ("feature3", [0.37071672]), ("feature0", [0])]),
    ],
)  # fmt: skip
def test_the_example_is_byte_for_byte_what_tensorflow_serializes(
    fixture: str, features: list[tuple[str, list[int] | list[bytes] | list[float]]]
) -> None:
    serialized = ast.literal_eval((FIXTURES / fixture).read_text().splitlines()[2])
    assert example(features) == serialized


def test_a_negative_int64_takes_ten_bytes_as_protobuf_writes_it() -> None:
    # protobuf's encoding guide: an int64 of -1 is the varint ff ff ff ff ff ff ff ff ff 01.
    assert example([("x", [-1])]).endswith(b"\xff" * 9 + b"\x01")


def _records(data: bytes) -> list[bytes]:
    """The records of a TFRecord file, each length and payload checked against its masked CRC."""
    records, at = [], 0
    while at < len(data):
        header = data[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[at + 8 : at + 12])[0] == masked_crc32c(header)
        payload = data[at + 12 : at + 12 + length]
        assert struct.unpack("<I", data[at + 12 + length : at + 16 + length])[0] == masked_crc32c(payload)
        records.append(payload)
        at += 16 + length
    return records


def _varints(data: bytes) -> list[int]:
    """The varints one after another in ``data`` (a packed int64 list, or a field's key and length)."""
    values, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append(value)
            value, shift = 0, 0
    return values


def _fields(message: bytes) -> list[tuple[int, bytes]]:
    """A message's length-delimited fields (all an Example's are, down to its packed lists): (number, bytes)."""
    out, at = [], 0
    while at < len(message):
        end = at
        while message[end] & 0x80 or len(_varints(message[at : end + 1])) < 2:
            end += 1
        key, size = _varints(message[at : end + 1])
        assert key & 7 == 2, "only length-delimited fields in an Example"
        out.append((key >> 3, message[end + 1 : end + 1 + size]))
        at = end + 1 + size
    return out


def _features(record: bytes) -> dict[str, bytes | int]:
    """An Example's features: each bytes_list's first value, or each int64_list's first value."""
    ((_, features),) = _fields(record)
    found: dict[str, bytes | int] = {}
    for _, entry in _fields(features):
        (_, name), (_, value) = _fields(entry)
        ((kind, listed),) = _fields(value)
        first = _fields(listed)[0][1]
        found[name.decode()] = _varints(first)[0] if kind == 3 else first
    return found


def test_synth_writes_shards_holding_every_image_with_its_1_based_label(tmp_path: Path) -> None:
    spec = SynthSpec(
        classes=3, train_per_class=4, val_per_class=2, width=40, height=32, seed=1, tfrecord_shards=2
    )
    manifest, paths = render_archive(spec, tmp_path / "a.tar", lambda done, total: None)
    shards = [p for p in paths if p.startswith("tfrecords/")]
    assert shards == ["tfrecords/train-00000-of-00002", "tfrecords/train-00001-of-00002",
                      "tfrecords/validation-00000-of-00001"]  # fmt: skip
    # tf_cnn_benchmarks' tf_record_pattern: <data_dir>/<subset>-*-of-*, subsets train and validation.
    assert all(
        fnmatch.fnmatch(p.split("/")[1], f"{s}-*-of-*")
        for p, s in zip(shards, ["train"] * 2 + ["validation"], strict=True)
    )
    assert manifest.files == spec.count() + 3
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    jpegs = {p.split("/")[-1]: (f, members[p]) for f in plan_files(spec) for p in [f.path]}
    seen = set()
    for shard in shards:
        for record in _records(members[shard]):
            features = _features(record)
            name = features["image/filename"]
            assert isinstance(name, bytes)
            file, data = jpegs[name.decode()]
            assert features["image/encoded"] == data and features["image/class/label"] == file.label + 1
            assert features["image/format"] == b"JPEG" and features["image/height"] == 32
            assert shard.split("/")[1].startswith("train" if file.split == "train" else "validation")
            seen.add(file.path)
    assert seen == {f.path for f in plan_files(spec)}  # every image once (a set of distinct paths)
    assert len(_records(members[shards[0]])) == 6  # round robin: 12 training images over 2 shards


def test_a_frame_is_length_crc_data_crc() -> None:
    framed = frame(b"abc")
    assert framed[:8] == struct.pack("<Q", 3) and framed[12:15] == b"abc" and len(framed) == 19
    assert _records(framed) == [b"abc"]


def test_the_probe_tells_a_dataset_with_shards_from_one_without(tmp_path: Path) -> None:
    spec = SynthSpec(classes=2, train_per_class=2, val_per_class=1, width=32, height=32, tfrecord_shards=1)
    render_archive(spec, tmp_path / "a.tar", lambda done, total: None)
    for name, wanted in (("with", True), ("without", False)):
        with tarfile.open(tmp_path / "a.tar") as tar:
            members = [m for m in tar.getmembers() if wanted or not m.name.startswith("tfrecords/")]
            tar.extractall(tmp_path / name, members=members, filter="data")
        done = subprocess.run(
            ["sh", "-c", probe_command(str(tmp_path / name))], capture_output=True, text=True, timeout=60
        )
        answer = parse_probe("node1", str(tmp_path / name), done.stdout)
        assert answer is not None and answer.usable and answer.tfrecords is wanted


def test_tf_cnn_benchmarks_reads_run_datas_shards_unless_data_dir_names_others() -> None:
    argv = TfCnnBenchmarks().argv
    synthetic = argv(RunDefaults(), gpu=True)
    assert not any(a.startswith("--data_dir") for a in synthetic)
    real = argv(RunDefaults.model_validate({"data": "/data/imagenet"}), gpu=True)
    assert "--data_dir=/data/imagenet/tfrecords" in real and "--data_name=imagenet" in real
    both = RunDefaults.model_validate({"data": "/data/imagenet", "data_dir": "/data/tf"})
    assert "--data_dir=/data/tf" in argv(both, gpu=True)  # an older inventory's data_dir still wins
    assert TfCnnBenchmarks.reads_tfrecords and not ResNet50.reads_tfrecords
