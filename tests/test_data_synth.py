"""`data synth`'s pure half (images, listing, manifest), the dataset probe run by a real shell, the mount
mapping of run.data, and the real-data run options."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from clusterctl.cli import main
from clusterctl.cli.data import dataset_path
from clusterctl.cli.run import BARE_DATA
from clusterctl.data.probe import DEFAULT_DATA, host_path, parse_probe, probe_command
from clusterctl.data.storage import NodeStorage as StorageAnswer
from clusterctl.data.storage import judge_storage, parse_storage, storage_command
from clusterctl.data.synth import (
    MANIFEST_NAME,
    SynthSpec,
    listing_line,
    make_manifest,
    plan_files,
    read_manifest,
    render_all,
    render_image,
)
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, Mount, RunDefaults, load_inventory, validate_document
from clusterctl.paths import data_dir
from clusterctl.run.sweep import plan_sweep
from clusterctl.sandbox.inventory import inventory_document
from clusterctl.sandbox.plan import plan_cpus, plan_sandbox
from clusterctl.sandbox.state import SandboxFiles
from clusterctl.workloads.resnet50 import ResNet50
from tests.helpers.strictjson import strict_loads

SMALL = SynthSpec(classes=3, train_per_class=4, val_per_class=2, width=48, height=40, seed=7)


def test_layout_is_imagenets_and_counts_match_the_spec() -> None:
    files = plan_files(SMALL)
    assert len(files) == SMALL.count() == 18
    assert files[0].path == "train/n00000000/n00000000_train_000000.JPEG"
    assert {f.path.split("/")[0] for f in files} == {"train", "val"}
    assert len({f.path for f in files}) == len(files)
    assert sorted({f.label for f in files if f.split == "val"}) == [0, 1, 2]


def test_images_are_deterministic_from_the_seed_and_decode_at_the_asked_size() -> None:
    first = dict((f.path, data) for f, data in render_all(SMALL))
    again = dict((f.path, data) for f, data in render_all(SMALL))
    assert first == again
    other = SynthSpec(**{**vars(SMALL), "seed": 8})
    assert render_image(other, plan_files(other)[0]) != first[plan_files(SMALL)[0].path]
    with Image.open(io.BytesIO(next(iter(first.values())))) as img:
        assert img.format == "JPEG" and img.size == (48, 40)


def test_default_images_come_near_imagenets_mean_size() -> None:
    spec = SynthSpec()
    size = len(render_image(spec, plan_files(spec)[0]))
    assert 60_000 < size < 200_000  # ILSVRC 2012's mean is about 110 KB


def test_classes_differ_in_colour_more_than_images_of_one_class() -> None:
    """The signature is learnable: the mean colours of two classes lie further apart than two images of one."""

    def mean_rgb(label: int, index: int) -> list[float]:
        file = next(
            f for f in plan_files(SMALL) if f.label == label and f.index == index and f.split == "train"
        )
        with Image.open(io.BytesIO(render_image(SMALL, file))) as img:
            pixel = img.convert("RGB").resize((1, 1), Image.Resampling.BOX).getpixel((0, 0))
        assert isinstance(pixel, tuple)
        return [float(c) for c in pixel]

    def distance(a: list[float], b: list[float]) -> float:
        return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5

    within = distance(mean_rgb(0, 0), mean_rgb(0, 1))
    between = distance(mean_rgb(0, 0), mean_rgb(1, 0))
    assert between > 2 * within


def test_manifest_round_trips_and_its_digest_follows_the_bytes() -> None:
    lines = [listing_line(f.path, data) for f, data in render_all(SMALL)]
    manifest = make_manifest(SMALL, lines)
    assert read_manifest(manifest.to_json()) == manifest
    assert manifest.files == 18 and manifest.bytes == sum(int(line.split("\t")[1]) for line in lines)
    path, size, digest = lines[0].split("\t")
    changed = make_manifest(SMALL, [f"{path}\t{size}\t{digest[::-1]}", *lines[1:]])
    assert changed.digest != manifest.digest
    assert read_manifest("{}") is None and read_manifest("not json") is None


def _probe(path: Path) -> object:
    done = subprocess.run(["sh", "-c", probe_command(str(path))], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return parse_probe("node1", str(path), done.stdout)


def test_probe_tells_absent_empty_foreign_and_ours_apart(tmp_path: Path) -> None:
    assert _probe(tmp_path / "none").state == "absent"  # type: ignore[attr-defined]
    (tmp_path / "empty").mkdir()
    assert _probe(tmp_path / "empty").state == "empty"  # type: ignore[attr-defined]
    theirs = tmp_path / "theirs"
    (theirs / "train").mkdir(parents=True)
    (theirs / "val").mkdir()
    answer = _probe(theirs)
    assert answer.state == "foreign" and answer.usable  # type: ignore[attr-defined]
    ours = tmp_path / "ours 'quoted'"
    ours.mkdir()
    manifest = make_manifest(SMALL, [listing_line(f.path, d) for f, d in render_all(SMALL)])
    (ours / MANIFEST_NAME).write_text(manifest.to_json())
    answer = _probe(ours)
    assert answer.state == "manifest" and answer.manifest == manifest  # type: ignore[attr-defined]
    assert not answer.usable  # type: ignore[attr-defined]  # no train/ and val/ yet
    (ours / MANIFEST_NAME).write_text("garbage")
    assert _probe(ours).state == "foreign"  # type: ignore[attr-defined]
    assert parse_probe("node1", "/x", "bash: not found\n") is None


def _inventory(mounts: list[Mount]) -> Inventory:
    inv = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    return inv.model_copy(update={"container": inv.container.model_copy(update={"mounts": mounts})})


def test_run_data_maps_to_the_nodes_through_the_deepest_mount() -> None:
    inv = _inventory(
        [Mount(source="/srv", target="/data"), Mount(source="/fast/imagenet", target="/data/imagenet")]
    )
    assert host_path(inv, "/data/imagenet") == "/fast/imagenet"
    assert host_path(inv, "/data/imagenet/sub") == "/fast/imagenet/sub"
    assert host_path(inv, "/data/other") == "/srv/other"
    with pytest.raises(
        InputError, match=r"field container.mounts: .* /elsewhere .* is under no mount's target"
    ):
        host_path(inv, "/elsewhere")
    with pytest.raises(InputError):
        host_path(inv, "/database")  # a prefix of the characters, not of the path


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"epochs": 2}, "epochs need"),
        ({"loader_only": True}, "loader_only need"),
        ({"data": "/data/x", "target_top1": 0.5}, "set epochs"),
        ({"data": "relative/path"}, "absolute path"),
    ],
)
def test_real_data_options_are_refused_without_what_they_need(
    settings: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        RunDefaults.model_validate(settings)


def test_resnet50_argv_carries_the_real_data_options() -> None:
    settings = RunDefaults.model_validate(
        {"data": "/data/synth", "loader_workers": 3, "epochs": 4, "target_top1": 0.6, "skip_bad_images": True}
    )
    argv = ResNet50().argv(settings, gpu=False)
    for expected in (
        "--data=/data/synth",
        "--loader-workers=3",
        "--epochs=4",
        "--target-top1=0.6",
        "--skip-bad-images",
    ):
        assert expected in argv
    assert not any(a.startswith("--data") for a in ResNet50().argv(RunDefaults(), gpu=False))


def test_data_synth_refuses_a_bad_path_before_contacting_any_node(capsys: pytest.CaptureFixture[str]) -> None:
    inventory = str(data_dir("inventories") / "sandbox-example.yml")
    assert main(["data", "synth", "-i", inventory, "--path", "relative/dir"]) == 2
    assert "--path 'relative/dir'" in capsys.readouterr().err


def _storage(path: Path) -> StorageAnswer | None:
    done = subprocess.run(
        ["sh", "-c", storage_command(str(path))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return parse_storage("node1", str(path), done.stdout)


def test_storage_check_lists_reads_and_tells_differing_datasets_apart(tmp_path: Path) -> None:
    for name in ("a", "b"):
        for file, data in render_all(SMALL):
            (tmp_path / name / file.path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / file.path).write_bytes(data)
    a, b = _storage(tmp_path / "a"), _storage(tmp_path / "b")
    assert a is not None and b is not None and a.present and a.files == 18
    assert (a.files, a.bytes, a.digest) == (b.files, b.bytes, b.digest)
    assert judge_storage("/data", "/srv", {"node1": a, "node2": b})[0].code == "dataset-read-rate"
    extra = tmp_path / "b" / "train" / "n00000000" / "extra.JPEG"
    extra.write_bytes(b"x")
    b = _storage(tmp_path / "b")
    missing = _storage(tmp_path / "none")
    assert missing is not None and not missing.present
    codes = {
        (f.code, f.node) for f in judge_storage("/data", "/srv", {"node1": a, "node2": b, "node3": missing})
    }
    assert ("dataset-differs", None) in codes and ("dataset-missing", "node3") in codes


def test_loader_rates_are_summed_per_node_from_every_ranks_line() -> None:
    # The payload's lines as mpirun --tag-output forwards them (format of a real 1-rank run's line).
    line = (
        '[1,{rank}]<stdout>:CLUSTERCTL_LOADER {{"host": "{host}", "images": 176, "images_per_sec": {rate}, '
        '"images_per_sec_per_worker": {rate}, "rank": {rank}, "seconds": 0.25, "skipped_images": 0, "workers": 1}}'
    )
    log = "\n".join(
        line.format(rank=r, host=h, rate=v)
        for r, h, v in ((0, "node1", 100.0), (1, "node1", 50.5), (2, "node2", 80.0))
    )
    metrics = ResNet50().metrics(log + "\n[1,1]<stdout>:CLUSTERCTL_LOADER {broken")
    assert metrics["loader_images_per_sec[node1]"].value == 150.5
    assert metrics["loader_images_per_sec[node2]"].value == 80.0


def test_sweep_puts_synthetic_and_real_data_side_by_side() -> None:
    inv = load_inventory(data_dir("inventories") / "sandbox-example.yml")
    plans = plan_sweep(inv, "resnet50", [1, 2], {"data": ["synthetic", "/data/imagenet"]})
    assert [p.options.settings.data for p in plans] == [
        "synthetic",
        "synthetic",
        "/data/imagenet",
        "/data/imagenet",
    ]
    assert sum("--data=/data/imagenet" in p.rank_argv for p in plans) == 2


def test_a_loader_only_run_has_no_model_flops() -> None:
    settings = RunDefaults.model_validate({"data": "/data/synth", "loader_only": True})
    assert ResNet50().compute(settings, "") is None
    assert ResNet50().compute(RunDefaults(), "") is not None


def test_no_gradient_volume_is_expected_where_none_is_known() -> None:
    loader = RunDefaults.model_validate({"data": "/data/synth", "loader_only": True})
    epochs = RunDefaults.model_validate({"data": "/data/synth", "epochs": 2})
    assert ResNet50().allreduce_volume(loader) is None and ResNet50().allreduce_volume(epochs) is None
    assert ResNet50().allreduce_volume(RunDefaults.model_validate({"data": "/data/synth"})) is not None


def test_every_epochs_top1_and_time_reach_the_record() -> None:
    # An epochs run's result line as the payload prints it (fields of a real 1-rank run).
    line = (
        'CLUSTERCTL_RESULT {"model": "resnet50", "total_images_per_sec": 1.273, "top1": 0.9792, '
        '"time_to_target_s": 316.137, "epochs": [{"epoch": 1, "steps": 12, "top1": 0.5417, "train_seconds": '
        '147.093, "val_images": 48, "wall_seconds": 157.953}, {"epoch": 2, "steps": 12, "top1": 0.9792, '
        '"train_seconds": 154.545, "val_images": 48, "wall_seconds": 316.137}, {"epoch": "x"}]}'
    )
    metrics = ResNet50().metrics(line)
    assert metrics["top1[epoch 1]"].value == 0.5417 and metrics["train_seconds[epoch 2]"].value == 154.545
    assert metrics["time_to_target_s"].value == 316.137 and metrics["top1"].unit == "fraction"


def test_the_sandbox_s_containers_see_where_data_synth_writes_by_default(tmp_path: Path) -> None:
    """`data synth` with no arguments writes where `run resnet50 --data` reads, with no edit (issue 40)."""
    document = inventory_document(
        plan_sandbox("sandbox", 2), plan_cpus([0, 1], 2), SandboxFiles(tmp_path), "~/w"
    )
    inventory = validate_document(document, tmp_path / "inventory.yml")
    assert dataset_path(inventory, None) == "/srv/synth" == host_path(inventory, DEFAULT_DATA)
    assert DEFAULT_DATA == BARE_DATA
    assert dataset_path(inventory, "/srv/elsewhere") == "/srv/elsewhere"


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["--data", "--nodes", "2"], DEFAULT_DATA),
        (["--nodes", "2", "--data"], DEFAULT_DATA),
        (["--data", "/data/mine", "--nodes", "2"], "/data/mine"),
    ],
)
def test_a_bare_data_option_reads_the_default_dataset(
    capsys: pytest.CaptureFixture[str], argv: list[str], wanted: str
) -> None:
    sandbox = str(data_dir("inventories") / "sandbox-example.yml")
    assert main(["run", "resnet50", "--dry-run", "-i", sandbox, *argv, "--json"]) == 0
    (plan,) = strict_loads(capsys.readouterr().out)
    assert f"--data={wanted}" in plan["argv"]
    assert "10.213.0.12:1" in plan["argv"][4]  # --nodes 2 was not taken for the path


def test_without_a_mount_for_the_default_dataset_the_error_names_the_mount_to_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No host is contacted: the modern inventory's addresses do not exist here."""
    h100 = data_dir("inventories") / "modern-h100.yml"
    runs = ["--runs-dir", str(tmp_path / "runs")]
    for argv in (["data", "synth"], ["run", "resnet50", "--nodes", "2", *runs, "--data"]):
        assert main([*argv, "-i", str(h100)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{h100}, field container.mounts" in err and "/data/synth" in err, err
        assert "Fix: add a mount to container.mounts, e.g. {source: /srv/datasets, target: /data" in err, err
