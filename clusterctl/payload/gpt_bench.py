"""GPT-2-style decoder training benchmark on synthetic tokens, data parallel through DDP or FSDP2.

Shipped inside the benchmark image beside ``resnet50_bench.py`` and launched on every rank; it imports
only torch, the standard library and its payload siblings, never clusterctl. The model is GPT-2's
layout: token and position embeddings, pre-LN blocks (LayerNorm, causal self-attention through
``scaled_dot_product_attention``, LayerNorm, a 4x MLP with GELU), a final LayerNorm and a language-model
head tied to the token embedding. Sizes by name (``SIZES``) or ``L<layers>-H<heads>-W<width>``; the
vocabulary is GPT-2's 50,257 tokens. ``--activation-checkpointing`` recomputes each block in backward.

The batch is one fixed batch of random tokens (the target is the input shifted by one): the loss on it
must be finite and fall as the model memorises it, which the result line reports (``loss_first``,
``loss_last``) for the run's sanity. Parallelism: ``--framework ddp`` (DistributedDataParallel) or
``--framework fsdp`` (PyTorch's ``fully_shard``: each block its own group, the embeddings and final norm
in the root's; under bf16/fp16 a mixed-precision policy gathers the parameters in that dtype and reduces
the gradients in float32). Rank 0 prints one line:

    CLUSTERCTL_RESULT {"total_tokens_per_sec": ..., "world_size": ..., "loss_first": ..., ...}

and every rank its per-step breakdown (``steptimer.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

if TYPE_CHECKING:  # the checker reads the payload as the package module; the image ships it top-level
    from clusterctl.payload import resnet50_bench as base
    from clusterctl.payload.emit import emit_line
    from clusterctl.payload.peak import peak_line
    from clusterctl.payload.steptimer import StepTimer, breakdown_line
else:
    import resnet50_bench as base
    from emit import emit_line
    from peak import peak_line
    from steptimer import StepTimer, breakdown_line

RESULT_PREFIX = "CLUSTERCTL_RESULT "
MODEL_NAME = "gpt"
VOCAB = 50_257
# name -> (layers, heads, width): GPT-2 small and medium, GPT-3 XL's 1.3B (head width 128), and a tiny
# one a CPU trains in seconds. Any other shape: L<layers>-H<heads>-W<width> (``dimensions``).
SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 2, 128),
    "124m": (12, 12, 768),
    "350m": (24, 16, 1024),
    "1.3b": (24, 16, 2048),
}
_CUSTOM = re.compile(r"L(\d+)-H(\d+)-W(\d+)")
LEARNING_RATE = 1e-3


def dimensions(size: str) -> tuple[int, int, int]:
    """(layers, heads, width) of a name of ``SIZES`` or of ``L<layers>-H<heads>-W<width>`` (clusterctl has
    checked the shape before launch; argparse reports anything else as a bad --model-size)."""
    if size in SIZES:
        return SIZES[size]
    found = _CUSTOM.fullmatch(size)
    if found is None:
        raise ValueError(f"{size!r}: one of {', '.join(SIZES)}, or L<layers>-H<heads>-W<width>")
    layers, heads, width = (int(group) for group in found.groups())
    if min(layers, heads, width) < 1 or width % heads:
        raise ValueError(f"{size!r}: layers, heads and width must be positive, the heads dividing the width")
    return layers, heads, width


class Block(nn.Module):
    """One pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width: int, heads: int, *, checkpointed: bool = False):
        super().__init__()
        self.heads = heads
        self.checkpointed = checkpointed
        self.ln_1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block on a (batch, sequence, width) tensor; checkpointed, its activations are not kept but
        recomputed in backward (non-reentrant ``torch.utils.checkpoint``, inside FSDP's per-block hooks)."""
        if self.checkpointed and torch.is_grad_enabled():
            out: torch.Tensor = checkpoint(self.body, x, use_reentrant=False)
            return out
        return self.body(x)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        """Attention then the MLP, each pre-normed and added to its input."""
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    """GPT-2's decoder: embeddings, ``layers`` blocks, final norm, head tied to the token embedding."""

    def __init__(
        self,
        layers: int,
        heads: int,
        width: int,
        seq_len: int,
        vocab: int = VOCAB,
        *,
        checkpointed: bool = False,
    ):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq_len, width)
        self.blocks = nn.ModuleList(Block(width, heads, checkpointed=checkpointed) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, sequence, vocab) for a (batch, sequence) tensor of token ids."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters of ``model``, a tied weight once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def shard(model: GPT, precision: str) -> GPT:
    """``model`` sharded with FSDP2's ``fully_shard``: each block one group, the rest in the root's.

    Under bf16/fp16 the parameters are all-gathered in that dtype and the gradients reduce-scattered in
    float32 (``MixedPrecisionPolicy``); fp32 moves float32 both ways. The root keeps its parameters
    gathered from forward to backward (FSDP2's default for the root), the blocks gather twice.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    policy = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32 if half else None)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def wrap(
    model: GPT, trainer: base.Trainer, args: argparse.Namespace
) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model made data parallel (DDP or FSDP2) and its AdamW optimizer."""
    if args.framework == "fsdp":
        if trainer.world_size == 1 and trainer.rank == 0:
            print("warning: --framework fsdp on a world size of 1 shards nothing", flush=True)
        wrapped: nn.Module = shard(model, args.precision)
    else:
        from torch.nn.parallel import DistributedDataParallel

        ids = [trainer.device.index] if trainer.device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=args.bucket_cap_mb)
    fused = trainer.device.type == "cuda"
    return wrapped, torch.optim.AdamW(wrapped.parameters(), lr=LEARNING_RATE, fused=fused)


def _size(text: str) -> str:
    """``--model-size``'s type: a size ``dimensions`` reads (argparse reports its ValueError)."""
    dimensions(text)
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--model-size", type=_size, default="124m", help="a name or L<layers>-H<heads>-W<width>")
    p.add_argument("--seq-len", type=int, default=1024, help="tokens per sequence")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per device per step")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute each block's activations in backward",
    )
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size (MB)")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--steps", type=int, default=100, help="measured steps")
    p.add_argument("--display-every", type=int, default=10)
    base.add_rendezvous_options(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Train on one fixed synthetic batch and report tokens/s from rank 0."""
    args = parse_args(argv)
    cpu_threads = base.use_allowed_cpus()
    trainer = base.Trainer(args)
    device = trainer.device
    dtype = base.autocast_dtype(args.precision, device)
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    tf32 = base.use_tf32(args.precision, capability)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.cuda.reset_peak_memory_stats(device)
    else:  # a CPU's peak for MFU, measured by every rank at once (peak.py)
        trainer.barrier()
        emit_line(peak_line(trainer.rank, args.precision))

    torch.manual_seed(0)  # the same weights and batch on every rank
    layers, heads, width = dimensions(args.model_size)
    gpt = GPT(layers, heads, width, args.seq_len, checkpointed=args.activation_checkpointing).to(device)
    parameters = parameter_count(gpt)
    model, optimizer = wrap(gpt, trainer, args)
    forward: Callable[[torch.Tensor], torch.Tensor] = torch.compile(model) if args.compile else model
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    tokens = torch.randint(0, VOCAB, (args.batch_size, args.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    autocast = torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    losses: list[torch.Tensor] = []  # each step's loss, detached: read only after the last sync

    def train_step(timer: StepTimer | None = None) -> None:
        begin, end = (timer.begin, timer.end) if timer else (lambda: None, lambda _: None)
        begin()
        end("input")
        optimizer.zero_grad()
        with autocast:
            loss = F.cross_entropy(forward(inputs).flatten(0, 1).float(), targets.flatten())
        losses.append(loss.detach())
        end("forward")
        (scaler.scale(loss) if scaler else loss).backward()
        end("backward")
        end("exposed_comm")  # DDP: the comm hook moved backward's end; FSDP waits inside backward()
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        end("optimizer")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    leader = trainer.rank == 0
    tokens_per_step = args.batch_size * args.seq_len * trainer.world_size
    if leader:
        print(
            f"Model: {MODEL_NAME}-{args.model_size} ({parameters:,} parameters)  framework: {args.framework}  "
            f"world size: {trainer.world_size}  batch: {args.batch_size} x {args.seq_len} tokens per device  "
            f"precision: {args.precision}  device: {device.type}"
            + ("  activation checkpointing" if args.activation_checkpointing else ""),
            flush=True,
        )
    timer = StepTimer(device)
    timer.watch(model)
    for _ in base.timed_windows(train_step, args.warmup_steps, args.warmup_steps or 1, sync):
        pass
    trainer.barrier()
    elapsed, last_step, last_time = 0.0, 0, 0.0
    for step, elapsed in base.timed_windows(lambda: train_step(timer), args.steps, args.display_every, sync):
        timer.read()
        if leader:
            rate = tokens_per_step * (step - last_step) / (elapsed - last_time)
            print(f"Step {step}/{args.steps}: {rate:,.1f} tokens/s total", flush=True)
            last_step, last_time = step, elapsed
    slowest = trainer.slowest(elapsed)
    # the largest peak of any rank (a collective: every rank takes part)
    peak = int(trainer.slowest(torch.cuda.max_memory_allocated(device))) if device.type == "cuda" else None

    if leader:
        total = tokens_per_step * args.steps / slowest
        result: dict[str, Any] = {
            "model": MODEL_NAME,
            "model_size": args.model_size,
            "parameters": parameters,
            "layers": layers,
            "heads": heads,
            "width": width,
            "seq_len": args.seq_len,
            "framework": args.framework,
            "total_tokens_per_sec": round(total, 3),
            "tokens_per_sec_per_device": round(total / trainer.world_size, 3),
            "steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "batch_size": args.batch_size,
            "world_size": trainer.world_size,
            "precision": args.precision,
            "compile": bool(args.compile),
            "activation_checkpointing": bool(args.activation_checkpointing),
            "tf32": tf32,
            "loss_first": _finite_or_text(losses[0].item()),
            "loss_last": _finite_or_text(losses[-1].item()),
            "peak_memory_bytes": peak,
            "seconds": round(slowest, 6),
            **base.device_facts(device, cpu_threads),
        }
        emit_line(RESULT_PREFIX + json.dumps(result, sort_keys=True))
    summary = timer.summary(trainer.rank, elapsed, world_size=trainer.world_size, framework=args.framework)
    emit_line(breakdown_line(summary))
    trainer.shutdown()
    return 0


def _finite_or_text(value: float) -> float | str:
    """``value`` rounded, or its name ("nan", "inf") so the result line stays strict JSON."""
    return round(value, 6) if math.isfinite(value) else str(value)


if __name__ == "__main__":
    base.exit_cleanly(main())
