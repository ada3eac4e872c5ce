"""Hypothesis over run directories and dataset listings (issue 37 items 3-6), and the Slurm run_dir a
mount list would split.

- A dataset listing: whatever a node's listing holds, a name `data synth` would remove is inside the
  dataset (no absolute path, no ``..``), Python's check and the node's ``grep -xE`` agree line by line,
  and the real switch script run over a generated listing never removes a file outside the dataset.
- Run directories: whatever their names and the run ids their records hold (``javascript:``, ``%``,
  ``#``, ``:``, spaces, copies of one run), every report link is relative and leads to the directory
  the record was read from, and every directory is read once: a run, a copy or a skipped line.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import Path
from tempfile import TemporaryDirectory
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterctl.data.switch import ARCHIVE, REFUSED, uploads, write_script
from clusterctl.data.synth import LISTED_PATH, LISTING_NAME, SynthSpec, listed_path_ok, make_manifest
from clusterctl.results.history import load_runs
from clusterctl.results.html import render_html
from clusterctl.results.record import RESULT_FILE
from clusterctl.results.report import build_report
from tests.helpers.hostile import BASE, assert_one_paragraph_refusal, reproducible, validate
from tests.helpers.records import record

_SEGMENT = st.sampled_from(["train", "val", "tfrecords", "..", ".", "", "n00000000", "etc", "x.JPEG", "~"])
_OURS = st.builds(
    lambda split, label, index: f"{split}/n{label:08d}/n{label:08d}_{split}_{index:06d}.JPEG",
    st.sampled_from(["train", "val"]),
    st.integers(0, 10**9),
    st.integers(0, 10**7),
)
# A listing line: one of ours, a path built from hostile segments, or any text at all.
LISTING_LINE = st.one_of(
    _OURS,
    st.lists(_SEGMENT, min_size=1, max_size=6).map("/".join),
    st.lists(_SEGMENT, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)),
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r\x00"), max_size=60),
)


@reproducible(400)
@given(line=LISTING_LINE)
def test_a_removable_listing_name_is_always_inside_the_dataset(line: str) -> None:
    if listed_path_ok(line):
        assert not line.startswith("/") and ".." not in line.split("/")
        assert posixpath.normpath(line) == line and not line.startswith("../")


@reproducible(40)
@given(lines=st.lists(LISTING_LINE, min_size=1, max_size=30))
def test_the_nodes_grep_agrees_with_the_check_here(lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    done = subprocess.run(
        ["grep", "-xE", LISTED_PATH],
        input=text.encode(),
        capture_output=True,
        timeout=30,
        env={"LC_ALL": "C"},
    )
    assert done.stdout.decode().splitlines() == [line for line in lines if listed_path_ok(line)]


SPEC = SynthSpec(classes=1, train_per_class=1, val_per_class=1, width=8, height=8)


@reproducible(25)
@given(extra=st.lists(LISTING_LINE, min_size=1, max_size=8))
def test_the_switch_never_removes_a_file_outside_the_dataset(extra: list[str]) -> None:
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        dataset = root / "a" / "data"
        (dataset / "train" / "n00000000").mkdir(parents=True)
        ours = dataset / "train" / "n00000000" / "n00000000_train_000000.JPEG"
        ours.write_bytes(b"jpeg")
        outside = [root / "victim", root / "a" / "victim", root / "a" / "train" / "n00000000" / "x.JPEG"]
        for victim in outside:
            victim.parent.mkdir(parents=True, exist_ok=True)
            victim.write_text("the user's")
        (dataset / LISTING_NAME).write_text(
            "".join(f"{line}\n" for line in ["train/n00000000/" + ours.name, *extra])
        )
        manifest = make_manifest(SPEC, [])
        for name, data in uploads(manifest, []).items():
            (dataset / name).write_bytes(data)
        subprocess.run(["tar", "-cf", str(dataset / ARCHIVE), "-T", "/dev/null"], check=True, timeout=30)
        done = subprocess.run(
            ["sh", "-c", write_script(str(dataset))], capture_output=True, text=True, timeout=60
        )
        assert all(victim.read_text() == "the user's" for victim in outside)
        if all(listed_path_ok(line) for line in extra):
            assert done.returncode == 0, done.stderr
            assert not ours.exists()  # the listed file of the old dataset is gone
        else:
            assert done.returncode == REFUSED and ours.exists()  # refused: nothing removed at all


_NAME = st.text(st.sampled_from("abz09_-.:%#?&<>\"' /\\$é"), min_size=1, max_size=24).filter(
    lambda name: "/" not in name and name not in (".", "..")
)
_RUN_ID = st.one_of(_NAME, st.just("javascript:alert(1)"), st.just("../../etc"), st.just("//evil.example/x"))


@reproducible(60)
@given(entries=st.lists(st.tuples(_NAME, _RUN_ID), min_size=1, max_size=6, unique_by=lambda e: e[0]))
def test_every_run_directory_is_read_once_and_linked_by_its_own_name(entries: list[tuple[str, str]]) -> None:
    with TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        for name, run_id in entries:
            (runs / name).mkdir(parents=True)
            # invalid runs: no figure to draw, so each example costs the page, not matplotlib
            (runs / name / RESULT_FILE).write_text(record(run_id, 1, 640.0, valid=False).model_dump_json())
        history = load_runs(runs)
        assert len(history.runs) == len({run_id for _, run_id in entries})
        assert len(history.runs) + len(history.copies) == len(entries) and not set(history.copies) & set(
            history.directories.values()
        )
        for page_dir in (runs, Path(tmp) / "page"):
            html = render_html(build_report(history.runs, []), history, runs, page_dir)
            links = re.findall(r'href="([^"]*)"', html)
            assert len(links) == len(history.runs)
            for link in links:
                assert link.startswith(".") and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", link)
            targets = {(page_dir / unquote(link.replace("&amp;", "&"))).resolve() for link in links}
            assert targets == {(runs / d).resolve() for d in history.directories.values()}


@pytest.mark.parametrize(("run_dir", "words"), [("/shared/a,b", "separates two mounts"),
                                                ("/shared/a:b", "separates a mount's source")])  # fmt: skip
def test_a_slurm_run_dir_a_mount_list_would_split_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], run_dir: str, words: str
) -> None:
    document = YAML(typ="safe").load(BASE)
    document["slurm"] = {"login": {"address": "10.0.0.9"}, "run_dir": run_dir, "runtime": "pyxis",
                         "image": "nvcr.io#nvidia/pytorch:24.01-py3"}  # fmt: skip
    path = tmp_path / "inv.yml"
    with path.open("w", encoding="utf-8") as fh:
        YAML(typ="safe", pure=True).dump(document, fh)
    outcome = validate(path, capsys)
    assert_one_paragraph_refusal(outcome, within_s=10.0)
    assert "slurm.run_dir" in outcome.err and words in " ".join(outcome.err.split())
