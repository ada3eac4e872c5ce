"""`data synth`'s switch on a node (``data.switch``), run by a real shell in a local directory as it runs
on a node: a re-run with another spec (TFRecords included) replaces the dataset; a listing or a symlink
that points out of the dataset is refused with nothing removed; an interrupted write never leaves a
directory that a run's dataset check accepts; a full disk here is reported as such (issue 37 item 3)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterctl.data.deliver import _lacks, _render, render_archive
from clusterctl.data.probe import NodeDataset, parse_probe, probe_command
from clusterctl.data.switch import ARCHIVE, REFUSAL, REFUSED, prepare_script, uploads, write_script
from clusterctl.data.synth import INCOMPLETE, LISTING_NAME, MANIFEST_NAME, Manifest, SynthSpec, read_manifest
from clusterctl.errors import EnvironmentProblem

A = SynthSpec(classes=3, train_per_class=4, val_per_class=2, width=24, height=20, seed=7, tfrecord_shards=2)
B = SynthSpec(classes=2, train_per_class=5, val_per_class=1, width=20, height=16, seed=8, tfrecord_shards=4)
CONTROL = {MANIFEST_NAME, LISTING_NAME}


def _sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)


def _synth(
    dataset: Path, spec: SynthSpec, scratch: Path, *, cut: bool = False
) -> tuple[Manifest, subprocess.CompletedProcess[str]]:
    """What ``deliver._write_node`` does on a node, with local files for SFTP (``cut``: the archive arrives
    cut short, as a write interrupted half-way leaves it)."""
    scratch.mkdir(exist_ok=True)
    manifest, paths = render_archive(spec, scratch / "a.tar", lambda done, total: None)
    assert _sh(prepare_script(str(dataset))).returncode == 0
    for name, data in uploads(manifest, paths).items():
        (dataset / name).write_bytes(data)
    archive = (scratch / "a.tar").read_bytes()
    (dataset / ARCHIVE).write_bytes(archive[: len(archive) // 2] if cut else archive)
    return manifest, _sh(write_script(str(dataset)))


def _probe(path: Path) -> NodeDataset:
    done = _sh(probe_command(str(path)))
    assert done.returncode == 0, done.stderr
    answer = parse_probe("node1", str(path), done.stdout)
    assert answer is not None
    return answer


def _files(dataset: Path) -> set[str]:
    return {str(p.relative_to(dataset)) for p in dataset.rglob("*") if not p.is_dir()}


def _listed(dataset: Path) -> set[str]:
    return set((dataset / LISTING_NAME).read_text().split())


def test_a_rerun_with_another_spec_over_tfrecords_replaces_the_dataset_whole(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    first, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    answer = _probe(dataset)
    assert answer.usable and answer.tfrecords and answer.manifest == first
    assert _files(dataset) == _listed(dataset) | CONTROL
    second, done = _synth(dataset, B, tmp_path / "b")
    assert done.returncode == 0, done.stderr
    answer = _probe(dataset)
    assert answer.usable and answer.tfrecords and answer.manifest == second
    assert _files(dataset) == _listed(dataset) | CONTROL  # none of A's files left, nothing aside left
    assert len(_listed(dataset)) == second.files == B.count() + 4 + 1
    assert not (dataset / "train" / "n00000002").exists()  # A's third class went with its files
    again, done = _synth(dataset, A, tmp_path / "a2")
    assert done.returncode == 0 and _probe(dataset).manifest == again == first


def test_a_listing_naming_paths_outside_the_dataset_is_refused_and_nothing_removed(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    first, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    victims = [tmp_path / "victim.txt", tmp_path / "abs victim.txt"]
    for victim in victims:
        victim.write_text("the user's")
    before = _files(dataset)
    for name in ["../victim.txt", str(victims[1]), "train/../../victim.txt"]:
        listing = dataset / LISTING_NAME
        kept = listing.read_text()
        listing.write_text(kept + name + "\n")
        _, done = _synth(dataset, B, tmp_path / "b")
        assert (
            done.returncode == REFUSED
            and REFUSAL in done.stderr
            and "no path data synth writes" in done.stderr
        )
        assert all(v.read_text() == "the user's" for v in victims)
        assert _files(dataset) == before and _probe(dataset).manifest == first  # the old dataset, whole
        listing.write_text(kept)


def test_a_symlink_in_the_dataset_is_refused_before_anything_is_removed(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    _, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    elsewhere = tmp_path / "elsewhere"
    shutil.move(dataset / "train" / "n00000000", elsewhere)  # the class directory now lives outside
    (dataset / "train" / "n00000000").symlink_to(elsewhere)
    _, done = _synth(dataset, B, tmp_path / "b")
    assert done.returncode == REFUSED and "symbolic link" in done.stderr
    assert len(list(elsewhere.iterdir())) == A.train_per_class  # nothing removed through the link
    (dataset / "train" / "n00000000").unlink()
    (dataset / "train").rename(tmp_path / "train-elsewhere")
    (dataset / "train").symlink_to(tmp_path / "train-elsewhere")  # the split itself a link
    _, done = _synth(dataset, B, tmp_path / "b2")
    assert done.returncode == REFUSED and f"{dataset}/train " in done.stderr
    assert len(list((tmp_path / "train-elsewhere").rglob("*.JPEG"))) == A.train_per_class * (A.classes - 1)


def test_someone_elses_file_in_a_class_directory_is_refused_and_kept(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    first, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    theirs = dataset / "val" / "n00000001" / "mine.JPEG"
    theirs.write_text("the user's")
    _, done = _synth(dataset, B, tmp_path / "b")
    assert (
        done.returncode == REFUSED and "val/n00000001/mine.JPEG is not a file data synth wrote" in done.stderr
    )
    assert theirs.read_text() == "the user's" and _probe(dataset).manifest == first


def test_a_cut_archive_leaves_the_old_dataset_whole_and_nothing_aside(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    first, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    before = {p: (dataset / p).read_bytes() for p in _files(dataset) - CONTROL}
    _, done = _synth(dataset, B, tmp_path / "b", cut=True)
    assert done.returncode not in (0, REFUSED)
    assert _probe(dataset).manifest == first and _probe(dataset).usable
    assert {p: (dataset / p).read_bytes() for p in _files(dataset) - CONTROL} == before
    assert {p.name for p in dataset.iterdir()} == CONTROL | {
        "train",
        "val",
        "tfrecords",
    }  # nothing aside left


def test_an_interrupted_synth_fails_the_runs_dataset_check_truncated_shards_included(tmp_path: Path) -> None:
    dataset = tmp_path / "data"
    first, done = _synth(dataset, A, tmp_path / "a")
    assert done.returncode == 0, done.stderr
    # What an interruption after the old files went leaves: the incomplete manifest, a shard cut short.
    pending = Manifest(first.spec, first.files, first.bytes, INCOMPLETE)
    (dataset / MANIFEST_NAME).write_text(pending.to_json())
    shard = dataset / "tfrecords" / "train-00000-of-00002"
    shard.write_bytes(shard.read_bytes()[:100])
    answer = _probe(dataset)
    assert answer.layout and answer.tfrecords and answer.incomplete and not answer.usable
    assert "half-written" in _lacks(answer)
    again, done = _synth(dataset, A, tmp_path / "a2")  # the next synth rewrites it
    assert (
        done.returncode == 0
        and _probe(dataset).usable
        and read_manifest((dataset / MANIFEST_NAME).read_text()) == again
    )


def test_a_full_disk_on_the_controller_is_reported_as_such(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is needed: a device whose every write fails with ENOSPC")
    (tmp_path / "dataset.tar").symlink_to("/dev/full")
    with pytest.raises(EnvironmentProblem, match=r"the disk is full .* nothing was written on any node"):
        _render(A, lambda done, total: None, str(tmp_path))
