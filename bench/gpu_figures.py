"""Take every GPU figure the project waits for in one call: on a machine with one NVIDIA GPU and no
network, with only what is there, in at most ``--budget-s`` seconds (8 minutes), into one JSON and a
readable table under ``--out``.

1. ``resnet50``: the payload (``clusterctl/payload/resnet50_bench.py``, one process, DDP world size 1)
   beside a plain loop (``plain_loops.py``: torchvision's ResNet-50 where it imports), synthetic data,
   bf16, channels-last, batch 256, compiled: alternated, ``--runs`` each, and the payload once more
   with its breakdown off (``CLUSTERCTL_BREAKDOWN=0``) in the same rotation while the node sampler runs
   beside the "on" runs (the breakdown's and telemetry's cost); then eager, once each. img/s, MFU
   (the FLOPs torch counts for one training step, against the GPU's dense bf16 peak), and the payload's
   step phases (its breakdown line).
2. ``gpt``: the payload (``gpt_bench.py``, 124M, bf16, compiled) beside a plain GPT-2 loop
   (transformers' ``GPT2LMHeadModel`` where it imports): tokens/s and MFU.
3. ``real_data``: a small JPEG set synthesised here (``clusterctl.data.synth``), the payload training on
   it with the decoder the image would use (DALI where it imports, else Pillow), and the loader alone.
4. ``collect``: the collection script ``check topology`` runs on a node (``nvidia-smi``, its topology,
   ...), its output kept for the parsers' fixtures.
5. ``recipes``: what the best ResNet-50 recipes do that section 1's payload may not, each as one change
   of it, run once and set over section 1's compiled payload median: channels-first (what
   channels-last gains), the SGD update as foreach or for-loop kernels (the payload's is fused on a
   GPU), CUDA graphs (``--compile-mode=reduce-overhead``) and max-autotune without them. Last, so that
   a spent budget costs the settling, never the figures.

Every section is in the JSON: its figures, or why it has none (a package absent, a run's error, the
time budget spent). ``--cpu-smoke`` runs the same code with tiny sizes on this machine's CPU in
seconds (no compile), so that a GPU window is never spent on a typo:

    python bench/gpu_figures.py --out DIR                 # on the GPU machine (docs/development.md)
    python bench/gpu_figures.py --cpu-smoke --out DIR     # anywhere: the same keys, in seconds

Needs Python and torch; torchvision, transformers, DALI and Pillow are used where present.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD_DIR = ROOT / "clusterctl" / "payload"
PLAIN = Path(__file__).resolve().parent / "plain_loops.py"
SCHEMA = "clusterctl.gpu-figures/1"
# In this order; the recipes last, so that what the budget cannot hold is the settling, not the figures.
SECTIONS = ("resnet50", "gpt", "real_data", "collect", "recipes")
RESULT = "CLUSTERCTL_RESULT "
BREAKDOWN = "CLUSTERCTL_BREAKDOWN "
PLAIN_RESULT = "PLAIN_RESULT "
# Dense bf16 tensor peak FLOP/s by the name torch gives the device (NVIDIA's datasheets, no sparsity).
PEAK_BF16 = {
    "H100 80GB HBM3": 989.4e12,  # SXM
    "H100 PCIe": 756.0e12,
    "H100 NVL": 835.0e12,
    "H200": 989.4e12,
    "A100-SXM4-80GB": 312.0e12,
    "A100-SXM4-40GB": 312.0e12,
    "A100 80GB PCIe": 312.0e12,
}

# The GPU run's sizes (the figures to beat are at these).
GPU_SIZES = {
    "resnet": {"batch": 256, "image_size": 224, "warmup_steps": 10, "steps": 50, "compile": True},
    "gpt": {
        "batch": 16,
        "seq_len": 1024,
        "shape": "12,12,768",
        "warmup_steps": 5,
        "steps": 30,
        "compile": True,
    },
    # The payload's recipe options, each measured once against section 1's compiled payload (which is
    # channels-last, the fused SGD and compile's default mode): the name, then what it changes (an
    # option added, or "-" and one of section 1's options taken away).
    "recipes": {
        "channels-first": ["-", "--channels-last"],
        "sgd-foreach": ["--optimizer-impl=foreach"],
        "sgd-for-loop": ["--optimizer-impl=for-loop"],
        "cuda-graphs": ["--compile-mode=reduce-overhead"],
        "max-autotune-no-cudagraphs": ["--compile-mode=max-autotune-no-cudagraphs"],
    },
    "data": {
        "classes": 8,
        "train_per_class": 256,
        "val_per_class": 16,
        "width": 400,
        "height": 350,
        "batch": 256,
        "steps": 20,
    },
}
# The smoke's: the GPU run's keys, each section shrunk to seconds on a CPU (no compile there).
SMOKE_SIZES = {
    "resnet": GPU_SIZES["resnet"]
    | {"batch": 2, "image_size": 32, "warmup_steps": 1, "steps": 2, "compile": False},
    "gpt": GPU_SIZES["gpt"]
    | {"batch": 2, "seq_len": 32, "shape": "2,2,64", "warmup_steps": 1, "steps": 2, "compile": False},
    # One recipe runs (the loop's code path); the compile modes need compile, which the smoke leaves off.
    "recipes": {"sgd-foreach": GPU_SIZES["recipes"]["sgd-foreach"]},
    "data": GPU_SIZES["data"]
    | {
        "classes": 2,
        "train_per_class": 8,
        "val_per_class": 2,
        "width": 48,
        "height": 40,
        "batch": 4,
        "steps": 2,
    },
}


class Clock:
    """The call's time budget: what is left, and each run's timeout within it."""

    def __init__(self, budget_s: float) -> None:
        self.end = time.monotonic() + budget_s

    def left(self) -> float:
        return self.end - time.monotonic()


def run_json(
    argv: list[str], prefixes: tuple[str, ...], clock: Clock, env: dict[str, str] | None = None
) -> dict:
    """Run ``argv`` within the budget; the JSON after each of ``prefixes`` in its stdout (the first line
    of each), or ``error`` with the exit status and the output's tail."""
    if clock.left() < 5:
        return {"error": "skipped: the time budget was spent"}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=clock.left()
        )
    except subprocess.TimeoutExpired:
        return {"error": "stopped: the time budget was spent during this run"}
    found: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        for prefix in prefixes:
            at = line.find(prefix)
            if at >= 0 and prefix not in found:
                found[prefix] = json.loads(line[at + len(prefix) :])
    if done.returncode != 0 or len(found) < len(prefixes):
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        return {"error": f"exit {done.returncode}: {tail[-1500:]}"}
    return found


def payload_argv(script: str, options: list[str]) -> list[str]:
    """One payload process as the image runs it on one GPU: DDP, world size 1, a free-ish port."""
    return [
        sys.executable,
        str(PAYLOAD_DIR / script),
        "--framework=ddp",
        f"--master-port={29500 + os.getpid() % 1000}",
        *options,
    ]


def single_rank_env(**extra: str) -> dict[str, str]:
    return {
        "OMPI_COMM_WORLD_SIZE": "1",
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        **extra,
    }


def mfu(items_per_sec: float | None, flops_per_item: float | None, device_name: str) -> float | None:
    """Model FLOPs utilisation: FLOPs per second done over the device's dense bf16 peak; None unknown."""
    peak = next((v for k, v in PEAK_BF16.items() if k in device_name), None)
    if not items_per_sec or not flops_per_item or peak is None:
        return None
    return round(items_per_sec * flops_per_item / peak, 4)


def median_of(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def resnet_section(sizes: dict[str, Any], runs: int, clock: Clock, cache: Path) -> dict[str, Any]:
    """Payload (breakdown on, sampler beside), payload (breakdown off) and plain loop, alternated;
    then eager once each."""
    common = _resnet_common(sizes)
    plain_common = [
        "resnet50",
        f"--batch={sizes['batch']}",
        f"--image-size={sizes['image_size']}",
        "--precision=bf16",
        "--channels-last",
        f"--warmup-steps={sizes['warmup_steps']}",
        f"--steps={sizes['steps']}",
    ]
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}  # later compiles of one graph read the first's
    out: dict[str, Any] = {"sizes": sizes}
    for mode, compiled in (("compiled", sizes["compile"]), ("eager", False)):
        if mode == "eager" and not sizes["compile"]:  # --cpu-smoke: the "compiled" runs were eager already
            out[mode] = {"note": "not run again: compile is off, so the compiled runs ran eager"}
            continue
        kinds: dict[str, list[dict]] = {"payload": [], "plain": []} | (
            {"payload_no_breakdown": []} if mode == "compiled" else {}
        )
        for i in range(runs if mode == "compiled" else 1):
            for kind in kinds:
                if kind == "plain":
                    argv = [sys.executable, str(PLAIN), *plain_common, *(["--compile"] if compiled else [])]
                    argv += ["--count-payload-flops"] if i == 0 else []
                    got = run_json(argv, (PLAIN_RESULT,), clock, env)
                    kinds[kind].append(_plain_run(got))
                    continue
                breakdown = "0" if kind == "payload_no_breakdown" else "1"
                argv = payload_argv("resnet50_bench.py", [*common, *(["--compile"] if compiled else [])])
                with sampler_beside(breakdown == "1", clock):
                    got = run_json(
                        argv,
                        (RESULT,) + ((BREAKDOWN,) if breakdown == "1" else ()),
                        clock,
                        single_rank_env(CLUSTERCTL_BREAKDOWN=breakdown, **env),
                    )
                kinds[kind].append(_payload_run(got, "total_images_per_sec"))
        out[mode] = _summarised(kinds, items_per_step=sizes["batch"])
    out["breakdown_cost"] = {
        "on_over_off": ratio(
            median_of(out["compiled"]["payload"], "value"),
            median_of(out["compiled"]["payload_no_breakdown"], "value"),
        ),
        "bound": "the payload with its breakdown and the sampler on within 2% of it with both off",
    }
    return out


def _resnet_common(sizes: dict[str, Any]) -> list[str]:
    """The payload's options of section 1's runs (bf16, channels-last, the sizes)."""
    return [
        f"--batch-size={sizes['batch']}",
        "--precision=bf16",
        "--channels-last",
        f"--image-size={sizes['image_size']}",
        f"--warmup-steps={sizes['warmup_steps']}",
        f"--steps={sizes['steps']}",
        f"--display-every={sizes['steps']}",
    ]


def recipe_options(sizes: dict[str, Any], change: list[str]) -> list[str]:
    """Section 1's compiled payload options with one recipe's ``change`` made."""
    options = _resnet_common(sizes) + (["--compile"] if sizes["compile"] else [])
    if change[:1] == ["-"]:
        return [o for o in options if o not in change[1:]]
    return options + change


def recipes_section(
    sizes: dict[str, Any], recipes: dict[str, list[str]], base: dict[str, Any], clock: Clock, cache: Path
) -> dict[str, Any]:
    """Each recipe option once: the compiled payload with that one change, over section 1's compiled
    payload median (``base``), so that one GPU window settles which options are faster."""
    median = (base.get("compiled") or {}).get("payload_median")
    out: dict[str, Any] = {
        "base": {"options": "bf16, channels-last, fused SGD, compile default", "median": median}
    }
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    for name, change in recipes.items():
        compile_mode = any(option.startswith("--compile-mode") for option in change)
        if compile_mode and not sizes["compile"]:
            out[name] = {"options": change, "note": "not run: compile is off (--cpu-smoke)"}
            continue
        options = recipe_options(sizes, change)
        got = run_json(payload_argv("resnet50_bench.py", options), (RESULT,), clock, single_rank_env(**env))
        run = _payload_run(got, "total_images_per_sec")
        out[name] = {"options": change, **run, "over_base": ratio(run.get("value"), median)}
    return out


def gpt_section(sizes: dict[str, Any], runs: int, clock: Clock, cache: Path) -> dict[str, Any]:
    """The payload's GPT and a plain GPT-2 loop of the same shape, alternated."""
    layers, heads, width = sizes["shape"].split(",")
    common = [
        f"--model-size=L{layers}-H{heads}-W{width}",
        f"--seq-len={sizes['seq_len']}",
        f"--batch-size={sizes['batch']}",
        "--precision=bf16",
        f"--warmup-steps={sizes['warmup_steps']}",
        f"--steps={sizes['steps']}",
        f"--display-every={sizes['steps']}",
    ]
    compiled = ["--compile"] if sizes["compile"] else []
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    kinds: dict[str, list[dict]] = {"payload": [], "plain": []}
    for i in range(runs):
        argv = payload_argv("gpt_bench.py", [*common, *compiled])
        kinds["payload"].append(
            _payload_run(run_json(argv, (RESULT,), clock, single_rank_env(**env)), "total_tokens_per_sec")
        )
        argv = [
            sys.executable,
            str(PLAIN),
            "gpt2",
            f"--batch={sizes['batch']}",
            f"--seq-len={sizes['seq_len']}",
            f"--gpt-shape={sizes['shape']}",
            "--precision=bf16",
            f"--warmup-steps={sizes['warmup_steps']}",
            f"--steps={sizes['steps']}",
            *compiled,
            *(["--count-payload-flops"] if i == 0 else []),
        ]
        kinds["plain"].append(_plain_run(run_json(argv, (PLAIN_RESULT,), clock, env)))
    return {"sizes": sizes, **_summarised(kinds, items_per_step=sizes["batch"] * sizes["seq_len"])}


def real_data_section(sizes: dict[str, Any], clock: Clock, scratch: Path) -> dict[str, Any]:
    """A synthesised JPEG set on this machine's disk, trained on and read alone by the payload."""
    try:
        sys.path.insert(0, str(ROOT))
        from clusterctl.data.synth import SynthSpec, render_all
    except ImportError as exc:
        return {"error": f"cannot synthesise the images here: {exc}"}
    spec = SynthSpec(
        **{k: sizes[k] for k in ("classes", "train_per_class", "val_per_class", "width", "height")}
    )
    start = time.monotonic()
    for file, data in render_all(spec):
        path = scratch / "data" / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    synthesised_s = time.monotonic() - start
    sys.path.insert(0, str(PAYLOAD_DIR))
    from dalidata import dali_importable

    decoder = "dali" if dali_importable() else "pillow"
    common = [
        f"--data={scratch / 'data'}",
        f"--batch-size={sizes['batch']}",
        "--precision=bf16",
        "--channels-last",
        "--warmup-steps=2",
        f"--steps={sizes['steps']}",
        f"--display-every={sizes['steps']}",
    ]
    train = run_json(payload_argv("resnet50_bench.py", common), (RESULT,), clock, single_rank_env())
    loader = run_json(
        payload_argv("resnet50_bench.py", [*common, "--loader-only"]), (RESULT,), clock, single_rank_env()
    )
    return {
        "sizes": sizes,
        "decoder": decoder,
        "synthesised_images_per_sec": round(spec.count() / synthesised_s, 1),
        "train": _payload_run(train, "total_images_per_sec"),
        "loader_only": _payload_run(loader, "total_images_per_sec"),
    }


def collect_section(out: Path, clock: Clock) -> dict[str, Any]:
    """The collection script of `check topology` run here; its output kept under ``out``."""
    if shutil.which("nvidia-smi") is None:
        return {"error": "no nvidia-smi on this machine: nothing for the GPU parsers' fixtures"}
    try:
        sys.path.insert(0, str(ROOT))
        from clusterctl.diagnostics.collectors import collection_script

        script, how = collection_script(), "the collection script of `check topology`"
    except ImportError as exc:  # clusterctl's dependencies are not here: the GPU commands alone
        script = "nvidia-smi; nvidia-smi -q; nvidia-smi topo -m; nvidia-smi topo -p2p n; nvidia-smi nvlink -s"
        how = f"nvidia-smi commands only ({exc})"
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=max(clock.left(), 30))
    (out / "collect.txt").write_text(
        done.stdout + ("\n--- stderr ---\n" + done.stderr if done.stderr else "")
    )
    return {"how": how, "exit": done.returncode, "file": "collect.txt", "bytes": len(done.stdout)}


def _payload_run(got: dict, key: str) -> dict[str, Any]:
    if "error" in got:
        return {"error": got["error"]}
    result = got[RESULT]
    run = {
        "value": result.get(key),
        "device_name": result.get("device_name", "cpu"),
        "seconds": result.get("seconds"),
    }
    if BREAKDOWN in got:
        run["phases"] = got[BREAKDOWN]
    return run


def _plain_run(got: dict) -> dict[str, Any]:
    if "error" in got:
        return {"error": got["error"]}
    result = got[PLAIN_RESULT]
    return {
        "value": result["items_per_sec"],
        "device_name": result["device_name"],
        "seconds": result["seconds"],
        "source": result["source"],
        "flops_per_step": result["flops_per_step"],
        "payload_flops_per_step": result["payload_flops_per_step"],
    }


def _summarised(kinds: dict[str, list[dict]], items_per_step: int) -> dict[str, Any]:
    """Each kind's runs and median, its MFU from the FLOPs the plain loop counted, payload / plain."""
    counted = next((r for r in kinds["plain"] if r.get("flops_per_step")), {})
    summary: dict[str, Any] = {}
    for kind, runs in kinds.items():
        median = median_of(runs, "value")
        flops_step = counted.get("flops_per_step" if kind == "plain" else "payload_flops_per_step")
        device = next((r["device_name"] for r in runs if "device_name" in r), "cpu")
        summary[kind] = runs
        summary[f"{kind}_median"] = median
        summary[f"{kind}_mfu"] = mfu(median, flops_step / items_per_step if flops_step else None, device)
    summary["payload_over_plain"] = ratio(summary["payload_median"], summary["plain_median"])
    summary["flops_per_step"] = {
        "plain": counted.get("flops_per_step"),
        "payload": counted.get("payload_flops_per_step"),
        "counted": "forward and backward of one training step, by torch's FlopCounterMode",
    }
    return summary


@contextlib.contextmanager
def sampler_beside(on: bool, clock: Clock) -> Iterator[None]:
    """The node sampler (``nodesampler.py``, one sample a second) running while the block runs."""
    if not on:
        yield
        return
    argv = [
        sys.executable,
        str(PAYLOAD_DIR / "nodesampler.py"),
        "--max-seconds",
        f"{max(clock.left(), 1):.0f}",
    ]
    sampler = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        sampler.terminate()
        sampler.wait(timeout=30)


def machine() -> dict[str, Any]:
    """What ran the figures: the GPU (nvidia-smi's name and driver), the CPUs, torch and the extras."""
    facts: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        facts["gpu"] = smi.stdout.strip().splitlines()[:1]
    for module in ("torch", "torchvision", "transformers", "nvidia.dali", "PIL"):
        try:
            facts[module] = getattr(importlib.import_module(module), "__version__", "present")
        except ImportError:
            facts[module] = None  # absent: the section that wants it says what it used instead
    return facts


def table(figures: dict[str, Any]) -> str:
    """The figures as lines a person reads (the JSON has every run)."""

    def num(value: float | None, digits: int = 0) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    lines = [
        f"GPU figures ({figures['mode']}) in {figures['seconds']:.0f} s: {', '.join(figures['machine'].get('gpu') or ['no GPU'])}"
    ]
    r = figures["resnet50"]
    for mode in ("compiled", "eager"):
        m = r.get(mode) or {}
        lines.append(
            f"resnet50 {mode:<8} payload {num(m.get('payload_median'))} img/s (MFU {num(m.get('payload_mfu'), 3)}), "
            f"plain {num(m.get('plain_median'))} img/s (MFU {num(m.get('plain_mfu'), 3)}); "
            f"payload/plain {num(m.get('payload_over_plain'), 3)}"
        )
    lines.append(
        f"breakdown+sampler on / off: {num((r.get('breakdown_cost') or {}).get('on_over_off'), 4)} (bound: >= 0.98)"
    )
    g = figures["gpt"]
    lines.append(
        f"gpt          payload {num(g.get('payload_median'))} tokens/s (MFU {num(g.get('payload_mfu'), 3)}), "
        f"plain {num(g.get('plain_median'))} tokens/s (MFU {num(g.get('plain_mfu'), 3)}); "
        f"payload/plain {num(g.get('payload_over_plain'), 3)}"
    )
    d = figures["real_data"]
    lines.append(
        f"real data ({d.get('decoder', '-')}): train {num((d.get('train') or {}).get('value'))} img/s, "
        f"loader alone {num((d.get('loader_only') or {}).get('value'))} img/s"
    )
    c = figures["collect"]
    lines.append(f"collect: {c.get('file', '-')} ({c.get('how') or c.get('error')})")
    recipes = figures["recipes"]
    for name, recipe in recipes.items():
        if name != "base" and isinstance(recipe, dict):
            said = recipe.get("note") or recipe.get("error")
            figure = f"{num(recipe.get('value'))} img/s, {num(recipe.get('over_base'), 3)} of the base"
            lines.append(f"recipe {name:<27} {said[:40] if said else figure}")
    errors = [f"  {path}: {e}" for path, e in _errors(figures)]
    return "\n".join(lines + (["errors:", *errors] if errors else [])) + "\n"


def _errors(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every ``error`` in the figures, with where it is."""
    if isinstance(value, dict):
        found = [(path or "/", str(value["error"])[:300])] if "error" in value else []
        return found + [e for k, v in value.items() if k != "error" for e in _errors(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _errors(v, f"{path}[{i}]")]
    return []


def main(argv: list[str] | None = None) -> int:
    """Take the figures; write ``gpu-figures.json`` and ``gpu-figures.txt`` under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON, the table, collect.txt")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, no compile: seconds")
    parser.add_argument(
        "--runs", type=int, default=None, help="alternated runs of each kind (GPU 3, smoke 1)"
    )
    parser.add_argument("--budget-s", type=float, default=480, help="the whole call's bound (default 8 min)")
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.cpu_smoke else GPU_SIZES
    runs = args.runs or (1 if args.cpu_smoke else 3)
    args.out.mkdir(parents=True, exist_ok=True)
    clock = Clock(args.budget_s)
    start = time.monotonic()
    figures: dict[str, Any] = {
        "schema": SCHEMA,
        "mode": "cpu-smoke" if args.cpu_smoke else "gpu",
        "runs": runs,
    }
    figures["machine"] = machine()
    with tempfile.TemporaryDirectory(prefix="gpu-figures-") as scratch:
        cache = args.out / "inductor-cache"
        steps = {
            "resnet50": lambda: resnet_section(sizes["resnet"], runs, clock, cache),
            "gpt": lambda: gpt_section(sizes["gpt"], runs, clock, cache),
            "real_data": lambda: real_data_section(sizes["data"], clock, Path(scratch)),
            "collect": lambda: collect_section(args.out, clock),
            "recipes": lambda: recipes_section(
                sizes["resnet"], sizes["recipes"], figures.get("resnet50") or {}, clock, cache
            ),
        }
        for name in SECTIONS:
            try:
                figures[name] = steps[name]()
            except Exception as exc:  # one section's failure is said in its place; the others still run
                figures[name] = {"error": f"{type(exc).__name__}: {exc}"}
    figures["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "gpu-figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    text = table(figures)
    (args.out / "gpu-figures.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
