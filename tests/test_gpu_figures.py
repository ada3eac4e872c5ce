"""`bench/gpu_figures.py --cpu-smoke`: the one command a GPU window runs, run here on the CPU with tiny
sizes through the same code, so that the window is never spent on a typo: every section writes its
figures (payload beside the plain loop, alternated; breakdown on and off; GPT; real data read by the
payload's loader; the collection) or says why it has none, into the JSON and the table."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu_figures.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_figures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cpu_smoke_writes_every_section_with_figures(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "gpu-figures.json").read_text())
    assert figures["schema"] == "clusterctl.gpu-figures/1" and figures["mode"] == "cpu-smoke"
    assert {"resnet50", "gpt", "real_data", "collect", "machine"} <= set(figures)
    resnet = figures["resnet50"]
    compiled = resnet["compiled"]
    # the three kinds alternated: each ran and gave a figure; the plain loop counted both models' FLOPs
    for kind in ("payload", "plain", "payload_no_breakdown"):
        assert compiled[f"{kind}_median"] > 0, compiled[kind]
    assert compiled["payload_over_plain"] == round(compiled["payload_median"] / compiled["plain_median"], 4)
    assert compiled["flops_per_step"]["plain"] > 0 and compiled["flops_per_step"]["payload"] > 0
    assert compiled["payload_mfu"] is None  # no known peak for a CPU: none is invented
    assert set(compiled["payload"][0]["phases"]["phases_ms"]) >= {"forward", "backward"}
    assert "compile is off" in resnet["eager"]["note"]  # the smoke compiles nothing: its runs were eager
    assert resnet["breakdown_cost"]["on_over_off"] > 0
    gpt = figures["gpt"]
    assert gpt["payload_median"] > 0 and gpt["plain_median"] > 0 and gpt["flops_per_step"]["payload"] > 0
    data = figures["real_data"]
    assert data["decoder"] in ("pillow", "dali") and data["train"]["value"] > 0
    assert data["loader_only"]["value"] > 0
    assert "nvidia-smi" in figures["collect"]["error"]  # said, not faked
    recipe = figures["recipes"]["sgd-foreach"]
    assert recipe["value"] > 0 and recipe["over_base"] == round(
        recipe["value"] / compiled["payload_median"], 4
    )
    table = (tmp_path / "gpu-figures.txt").read_text()
    assert table == done.stdout and table.startswith("GPU figures (cpu-smoke)")
    assert "payload/plain" in table and "no nvidia-smi" in table and "recipe sgd-foreach" in table


def test_each_gpu_recipe_changes_one_thing_of_the_compiled_payload() -> None:
    module = _module()
    sizes = module.GPU_SIZES["resnet"]
    base = module.recipe_options(sizes, [])
    assert "--channels-last" in base and "--compile" in base and "--precision=bf16" in base
    recipes = module.GPU_SIZES["recipes"]
    assert set(module.recipe_options(sizes, recipes["channels-first"])) == set(base) - {"--channels-last"}
    graphs = module.recipe_options(sizes, recipes["cuda-graphs"])
    assert graphs == [*base, "--compile-mode=reduce-overhead"]
    # the payload accepts every recipe's options (a typo would cost the GPU window its run)
    payload = importlib.import_module("tests.helpers.resnet50_payload").bench
    for name, change in recipes.items():
        assert payload.parse_args(module.recipe_options(sizes, change)), name


def test_mfu_is_the_flops_done_over_the_device_s_dense_bf16_peak() -> None:
    figures = _module()
    # the plain loop's 5,655 img/s on one H100 SXM at ResNet-50's 24.6 GFLOPs per trained image
    assert figures.mfu(5655, 24.6e9, "NVIDIA H100 80GB HBM3") == round(5655 * 24.6e9 / 989.4e12, 4)
    assert figures.mfu(5655, 24.6e9, "cpu") is None
    assert figures.mfu(None, 24.6e9, "NVIDIA H100 80GB HBM3") is None
