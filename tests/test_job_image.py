"""The image the job runs is the image that is checked (issue 38 item 3): a job whose slurm.image is of a
known family and lacks what the ranks need is refused before sbatch (exit 2, naming the image, the piece and
the fix); an image of no known family gets a first step that checks on one task and ends the job with one
message. The in-job check is run here by sh against a Python that lacks the modules and one that has them."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterctl.cli import main
from clusterctl.errors import InputError
from clusterctl.inventory import Inventory, validate_document
from clusterctl.run.plan import plan_run
from clusterctl.workloads import NAMES, get_workload
from clusterctl.workloads.image_caps import (
    IMAGE_CHECK_EXIT,
    Piece,
    built_job_image,
    check_job_image,
    find_family,
    image_check_step,
    job_needs,
    load_families,
    slurm_job_image,
)
from clusterctl.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[1]
MODERN = ROOT / "inventories" / "modern-h100.yml"
SANDBOX = ROOT / "inventories" / "sandbox-example.yml"
NGC_PYTORCH = "nvcr.io#nvidia/pytorch:24.01-py3"


def _document(base: Path, image_spec: dict[str, Any] | None = None, **slurm: Any) -> dict[str, Any]:
    """``base`` with a slurm block of ``slurm`` (its ``image`` is slurm.image) and ``image_spec`` as image:."""
    document = load_yaml(base)
    document["slurm"] = {"login": {"address": "10.20.0.100"}, "run_dir": "/shared/clusterctl", **slurm}
    if image_spec is not None:
        document["image"] = image_spec
    return document


def _inventory(base: Path, image_spec: dict[str, Any] | None = None, **slurm: Any) -> Inventory:
    return validate_document(_document(base, image_spec, **slurm), base)


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(json.dumps(document))  # YAML 1.2 reads JSON
    return path


def test_the_ngc_pytorch_image_with_horovod_exits_2_before_sbatch_naming_the_image_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _document(MODERN, runtime="pyxis", image=NGC_PYTORCH)
    assert document["workloads"]["resnet50"]["framework"] == "horovod"
    path = _write(tmp_path, document)
    for dry in (["--dry-run"], []):  # the real run too: refused before the launcher submits anything
        code = main(["run", "resnet50", "-i", str(path), "--launcher", "slurm", *dry])
        out, err = capsys.readouterr()
        assert code == 2
        assert out == ""  # no batch script, no job
        message = " ".join(err.split())
        assert NGC_PYTORCH in message and "NGC PyTorch" in message
        assert "Horovod (import horovod.torch)" in message
        assert "--framework ddp" in message and "an image with Horovod" in message
        assert "slurm.image" in message and "pytorch-release-notes" in message


def test_the_same_job_with_ddp_renders_and_needs_no_check_in_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _document(MODERN, runtime="pyxis", image=NGC_PYTORCH))
    code = main(
        ["run", "resnet50", "-i", str(path), "--launcher", "slurm", "--framework", "ddp", "--dry-run"]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "resnet50_bench.py --framework=ddp" in out
    assert "image check" not in out and "lacks" not in out


@pytest.mark.parametrize(
    ("image", "workload", "framework", "missing", "fix"),
    [
        (NGC_PYTORCH, "nccl-tests", "horovod", "/opt/nccl-tests/build/all_reduce_perf", "image with nccl-tests"),
        ("nvcr.io/nvidia/pytorch:23.10-py3", "resnet50", "horovod", "horovod.torch", "--framework ddp"),
        ("nvcr.io#nvidia/tensorflow:23.03-tf1-py3", "resnet50", "ddp", "PyTorch (import torch)",
         "an image with PyTorch"),
        ("nvcr.io#nvidia/tensorflow:23.03-tf1-py3", "tf_cnn_benchmarks", "horovod",
         "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py", "paper-2020"),
    ],
)  # fmt: skip
def test_a_known_family_that_lacks_a_piece_is_refused(
    image: str, workload: str, framework: str, missing: str, fix: str
) -> None:
    inventory = _inventory(MODERN, runtime="pyxis", image=image)
    plan = plan_run(inventory, workload, framework=framework, precision="fp16")
    with pytest.raises(InputError) as caught:
        check_job_image(inventory, slurm_job_image(inventory), plan)
    message = str(caught.value)
    assert image in message and missing in message and fix in message and "Fix:" in message


def test_the_profile_is_not_judged_when_the_slurm_block_names_the_image() -> None:
    # paper-2020 builds TensorFlow 1.14 on Python 2.7; the job runs NGC PyTorch, which runs resnet50 (ddp)
    inventory = _inventory(MODERN, {"profile": "paper-2020"}, runtime="pyxis", image=NGC_PYTORCH)
    plan = plan_run(inventory, "resnet50", framework="ddp")
    check_job_image(inventory, slurm_job_image(inventory), plan)
    # the ssh launcher runs the built image: the profile's refusal, naming the profile that runs it
    with pytest.raises(InputError, match="runs on the modern or cpu profile"):
        check_job_image(inventory, built_job_image(inventory), plan)


def test_a_built_image_without_horovod_is_refused_for_a_horovod_run() -> None:
    inventory = _inventory(SANDBOX, {"profile": "cpu", "versions": {"horovod": None}}, runtime="docker")
    plan = plan_run(inventory, "resnet50", framework="horovod")
    with pytest.raises(InputError, match=r"the cpu image \(clusterctl-built cpu\).*--framework ddp"):
        check_job_image(inventory, built_job_image(inventory), plan)
    check_job_image(inventory, built_job_image(inventory), plan_run(inventory, "resnet50", framework="ddp"))


def test_families_match_their_references_from_their_first_sourced_release() -> None:
    assert {f.name for f in load_families()} == {"NGC PyTorch", "NGC TensorFlow"}
    for family in load_families():
        assert re.search(
            r"https://docs\.nvidia\.com/deeplearning/frameworks/\S+release-notes/", family.source
        )
    named = {
        NGC_PYTORCH: "NGC PyTorch",
        "nvcr.io/nvidia/pytorch:25.01-py3": "NGC PyTorch",
        "nvcr.io#nvidia/tensorflow:21.04-tf2-py3": "NGC TensorFlow",
        "nvcr.io#nvidia/pytorch:19.05-py3": None,  # before the first release whose notes were read
        "nvcr.io#nvidia/pytorch:24.01-py3-custom": None,
        "/shared/images/pytorch_24.01-py3.sqsh": None,
        "registry.example.com#nvidia/pytorch:24.01-py3": None,
    }
    assert {ref: getattr(find_family(ref), "name", None) for ref in named} == named


@pytest.mark.parametrize("workload", NAMES)
def test_every_workload_says_what_it_needs(workload: str) -> None:
    gpu = workload in ("nccl-tests", "tf_cnn_benchmarks", "gpt")
    inventory = _inventory(MODERN if gpu else SANDBOX, runtime="none")
    framework = {"gpt": "ddp", "nccl-tests": "ddp"}.get(workload, "horovod")
    sized: dict[str, Any] = {"model_size": "tiny", "batch_size": 1} if workload == "gpt" else {}
    needs = job_needs(plan_run(inventory, workload, framework=framework, precision="fp16", **sized))
    assert needs
    expected = {
        "resnet50": [Piece("module", "torch"), Piece("module", "horovod.torch")],
        "allreduce": [Piece("module", "torch"), Piece("module", "horovod.torch")],
        "gpt": [Piece("module", "torch")],
        "nccl-tests": [Piece("file", "/opt/nccl-tests/build/all_reduce_perf")],
        "tf_cnn_benchmarks": [
            Piece("module", "tensorflow"),
            Piece("module", "horovod.tensorflow"),
            Piece("file", "/benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py"),
        ],
    }
    assert needs == expected[get_workload(workload).name]


def _check_command(step: str) -> list[str]:
    """The ``sh -c SCRIPT`` the step runs, as an argv."""
    line = next(ln for ln in step.splitlines() if ln.startswith("srun "))
    argv = shlex.split(line.removesuffix(" || {"))
    return argv[argv.index("sh") :]


@pytest.mark.parametrize(
    ("runtime", "image", "wrapper"),
    [
        ("apptainer", "/shared/images/bench.sif", "apptainer exec /shared/images/bench.sif sh -c"),
        ("pyxis", "/shared/images/site.sqsh", "--container-image=/shared/images/site.sqsh --no-container-mount-home sh"),
        ("docker", "site/bench:1", "docker run --rm --entrypoint= site/bench:1 sh -c"),
        ("none", None, "--kill-on-bad-exit=1 sh -c"),
    ],
)  # fmt: skip
def test_an_unknown_image_is_checked_by_the_jobs_first_step_which_ends_the_job_with_one_message(
    runtime: str, image: str | None, wrapper: str, tmp_path: Path
) -> None:
    inventory = _inventory(SANDBOX, runtime=runtime, image=image)
    plan = plan_run(inventory, "resnet50", framework="horovod")
    check_job_image(inventory, slurm_job_image(inventory), plan)  # nothing known to refuse: the job checks
    step = image_check_step(inventory, plan, runtime, image or "")
    srun = next(ln for ln in step.splitlines() if ln.startswith("srun "))
    assert wrapper in " ".join(shlex.split(srun.removesuffix(" || {")))
    argv = _check_command(step)
    # A Python without torch and Horovod (the system's): exit 3, one line per missing piece, the fix.
    lacking, having = tmp_path / "lacking", tmp_path / "having"
    for directory, body in ((lacking, 'exec /usr/bin/python3 "$@"'), (having, "exit 0")):
        directory.mkdir()
        (directory / "python").write_text(f"#!/bin/sh\n{body}\n")
        (directory / "python").chmod(0o755)
    done = subprocess.run(
        argv, env={"PATH": f"{lacking}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == IMAGE_CHECK_EXIT
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stdout + done.stderr
    assert "lacks PyTorch (import torch)" in lines[0] and "lacks Horovod (import horovod.torch)" in lines[1]
    assert "--framework ddp" in lines[1] and (image or "the Python of the nodes") in lines[1]
    done = subprocess.run(
        argv, env={"PATH": f"{having}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "")


def test_the_batch_script_runs_the_check_before_the_snapshot_and_a_known_image_has_none() -> None:
    from datetime import UTC, datetime

    from clusterctl.run.slurm.script import plan_batch

    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    inventory = _inventory(SANDBOX, runtime="apptainer", image="/shared/images/bench.sif")
    script = plan_batch(inventory, plan_run(inventory, "resnet50"), started, "t").script
    assert script.index("apptainer exec /shared/images/bench.sif sh -c") < script.index("snapshot before")
    assert f"exit {IMAGE_CHECK_EXIT}" in script
    known = _inventory(MODERN, runtime="pyxis", image=NGC_PYTORCH)
    script = plan_batch(known, plan_run(known, "resnet50", framework="ddp"), started, "t").script
    assert "no family clusterctl knows" not in script and f"exit {IMAGE_CHECK_EXIT}" not in script


def test_an_unknown_image_is_checked_for_the_binary_nccl_tests_runs(tmp_path: Path) -> None:
    inventory = _inventory(MODERN, runtime="pyxis", image="/shared/images/site.sqsh")
    step = image_check_step(inventory, plan_run(inventory, "nccl-tests"), "pyxis", "/shared/images/site.sqsh")
    argv = _check_command(step)
    assert 'test -x "/opt/nccl-tests/build/all_reduce_perf"' in argv[2] and "import" not in argv[2]
    done = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == IMAGE_CHECK_EXIT
    assert done.stdout == (
        "clusterctl: image /shared/images/site.sqsh lacks /opt/nccl-tests/build/all_reduce_perf. Fix: set "
        "slurm.image to an image with nccl-tests built at /opt/nccl-tests/build (as the modern profile builds "
        "it: image.versions.nccl_tests).\n"
    )
