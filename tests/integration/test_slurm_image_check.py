"""The image the job runs is the image that is checked, on the session sandbox's real Slurm: a job whose
slurm.image names an image of no family clusterctl knows (here the sandbox's own cpu image, by its tag)
starts with the check step, one task in a `docker run` of that image; a workload whose imports the image
lacks (tf_cnn_benchmarks: TensorFlow) ends the job there, with one line per missing piece naming the image
and the fix, and no rank ever starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.cli import main
from clusterctl.image.record import effective_image_ref
from clusterctl.inventory import Inventory
from clusterctl.workloads.image_caps import IMAGE_CHECK_EXIT
from clusterctl.yamlio import load_yaml
from tests.helpers.sandbox import Sandbox
from tests.helpers.strictjson import strict_loads

pytestmark = pytest.mark.integration


def test_a_job_whose_image_lacks_the_workloads_imports_ends_at_the_check_step(
    cluster: Inventory, sandbox2: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = load_yaml(sandbox2.inventory_path)
    image = effective_image_ref(cluster)
    document["slurm"]["image"] = image  # named by its tag: of no known family, so checked in the job
    path = tmp_path / "inventory.yml"
    path.write_text(json.dumps(document))  # YAML 1.2 reads JSON
    runs = tmp_path / "runs"
    capsys.readouterr()
    code = main(
        ["run", "tf_cnn_benchmarks", "-i", str(path), "--launcher", "slurm", "--precision", "fp32",
         "--runs-dir", str(runs), "--json"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured.err[-3000:]
    (record,) = strict_loads(captured.out)["runs"]
    assert not record["valid"]
    output = (runs / record["run_id"] / "output.log").read_text()
    lacking = [ln for ln in output.splitlines() if " lacks " in ln]
    assert lacking == [
        f"clusterctl: image {image} lacks TensorFlow (import tensorflow). Fix: set slurm.image to an image "
        "that has it (the paper-2020 profile, for tf_cnn_benchmarks).",
        f"clusterctl: image {image} lacks Horovod (for TensorFlow) (import horovod.tensorflow). Fix: set "
        "slurm.image to an image that has it (the paper-2020 profile, for tf_cnn_benchmarks).",
        f"clusterctl: image {image} lacks /benchmarks/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py. Fix: set "
        "slurm.image to an image that has it (the paper-2020 profile, for tf_cnn_benchmarks).",
    ], output[-3000:]
    assert f"clusterctl: the image check failed ({IMAGE_CHECK_EXIT}): the run does not start" in output
    assert "Traceback" not in output and "tf_cnn_benchmarks.py --device" not in output
