"""The plain training loops ``gpu_figures.py`` measures the payloads against: what a user would write
without clusterctl (model, optimizer, autocast, optionally ``torch.compile``, synthetic data, a
synchronised clock), with nothing of the payload's own (no DDP, no breakdown, no result line).

    python bench/plain_loops.py resnet50 --batch 256 --image-size 224 --precision bf16 --compile
    python bench/plain_loops.py gpt2 --batch 16 --seq-len 1024 --precision bf16 --compile

Each loop does the payload's work: its optimizer update (ResNet-50: SGD without momentum; GPT: AdamW)
in torch's default implementation (foreach; the payload asks for the fused kernel on a GPU), so that
payload / plain measures how the payload trains, not a different recipe.

The models are torchvision's ``resnet50`` and transformers' ``GPT2LMHeadModel`` where those import;
else the payload's own definitions of the same shapes (``clusterctl/payload/``), and the result says
which (``source``). ``--count-payload-flops`` also counts the payload model's FLOPs per training step at
the same shapes, so that ``gpu_figures.py`` can give the payload's MFU without a process of its own.
Prints one line, ``PLAIN_RESULT {json}``. Needs only Python and torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

PAYLOAD_DIR = Path(__file__).resolve().parents[1] / "clusterctl" / "payload"
PREFIX = "PLAIN_RESULT "
GPT2_VOCAB = 50257
GPT2_124M = (12, 12, 768)  # layers, heads, width


def _payload_module(name: str) -> Any:
    """A payload script imported as the image runs it (its directory on the path, not as a package)."""
    if str(PAYLOAD_DIR) not in sys.path:
        sys.path.insert(0, str(PAYLOAD_DIR))
    return __import__(name)


def resnet50(source: str) -> tuple[nn.Module, str]:
    """ResNet-50 (1000 classes): torchvision's where it imports (``source`` auto), else the payload's."""
    if source in ("auto", "torchvision"):
        try:
            import torchvision

            return torchvision.models.resnet50(), "torchvision"
        except ImportError:
            if source == "torchvision":
                raise
    return _payload_module("resnet50_bench").ResNet50(num_classes=1000), "payload definition"


def gpt2(source: str, seq_len: int, shape: tuple[int, int, int]) -> tuple[nn.Module, str]:
    """GPT-2 of ``shape`` (layers, heads, width): transformers' where it imports, else the payload's."""
    layers, heads, width = shape
    if source in ("auto", "transformers"):
        try:
            from transformers import GPT2Config, GPT2LMHeadModel

            config = GPT2Config(
                n_layer=layers, n_head=heads, n_embd=width, n_positions=seq_len, vocab_size=GPT2_VOCAB
            )
            return _Logits(GPT2LMHeadModel(config)), "transformers"
        except ImportError:
            if source == "transformers":
                raise
    return _payload_module("gpt_bench").GPT(layers, heads, width, seq_len), "payload definition"


class _Logits(nn.Module):
    """transformers' model returning its logits tensor, as the payload's GPT does."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens).logits


def _batch(args: argparse.Namespace, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if args.model == "resnet50":
        images = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
        if args.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, torch.randint(0, 1000, (args.batch,), device=device)
    tokens = torch.randint(0, GPT2_VOCAB, (args.batch, args.seq_len + 1), device=device)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _loss(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    out = model(inputs)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets.reshape(-1))


def train_step_flops(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, dtype: Any) -> int:
    """FLOPs of one forward and backward pass as torch counts them (FlopCounterMode), eager."""
    with FlopCounterMode(display=False) as counter:
        with torch.autocast(inputs.device.type, dtype=dtype, enabled=dtype is not None):
            loss = _loss(model, inputs, targets)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def _sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def main(argv: list[str] | None = None) -> int:
    """Train the plain loop and print its result line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=["resnet50", "gpt2"])
    p.add_argument("--source", default="auto", help="auto, torchvision/transformers, or payload")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--gpt-shape", default="12,12,768", help="layers,heads,width")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--count-payload-flops", action="store_true")
    args = p.parse_args(argv)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    layers, heads, width = (int(x) for x in args.gpt_shape.split(","))

    def build(source: str) -> tuple[nn.Module, str]:
        if args.model == "resnet50":
            return resnet50(source)
        return gpt2(source, args.seq_len, (layers, heads, width))

    model, source = build(args.source)
    model = model.to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    inputs, targets = _batch(args, device)
    flops = train_step_flops(model, inputs, targets, dtype)
    payload_flops = None
    if args.count_payload_flops:
        theirs = build("payload")[0].to(device)
        payload_flops = train_step_flops(theirs, inputs, targets, dtype)
        del theirs
    if args.model == "resnet50":  # the payload's update (SGD, no momentum), in torch's default implementation
        optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    step_model = torch.compile(model) if args.compile else model

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = _loss(step_model, inputs, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    sync = _sync(device)
    for _ in range(args.warmup_steps):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    items = args.batch * (args.seq_len if args.model == "gpt2" else 1) * args.steps
    result = {
        "model": args.model,
        "source": source,
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_version": torch.__version__,
        "batch": args.batch,
        "precision": args.precision,
        "compile": args.compile,
        "channels_last": args.channels_last,
        "steps": args.steps,
        "seconds": round(seconds, 6),
        "items_per_sec": round(items / seconds, 3),
        "unit": "tokens/s" if args.model == "gpt2" else "img/s",
        "flops_per_step": flops,
        "payload_flops_per_step": payload_flops,
    }
    print(PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
