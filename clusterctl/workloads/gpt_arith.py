"""The arithmetic of the payload's GPT: parameters, training FLOPs per token, bytes on the fabric per step,
memory per device. Pure.

**Parameters** (GPT-2's layout, tied head): token embedding ``V x W``, position embedding ``S x W``, per
block ``12 W^2 + 13 W`` (attention's qkv ``3W^2 + 3W`` and projection ``W^2 + W``, the MLP's ``4W^2 + 4W``
and ``4W^2 + W``, two LayerNorms ``4W``), and the final LayerNorm ``2W``. GPT-2 small (12 x 768, S
1024) gives 124,439,808.

**FLOPs per token** (PaLM, Chowdhery et al. 2022, appendix B; Megatron-LM, Narayanan et al. 2021,
section 5.1): ``6 N + 12 L W S``. ``6 N``: each parameter's multiply-accumulate in the forward pass, twice
again in the backward (two FLOPs each); N leaves out the position embedding (a lookup, no multiply) and
counts the tied head once (its matmul is real). ``12 L W S``: attention's two ``S x S`` matmuls (scores
and the weighted sum), ``2 x 2 x W x S`` FLOPs per token and layer forward, x 3 for training. This is
the full (non-causal) count, as both papers use; the causal kernel skips about half of it.

**Bytes per node and step** (one rank per node or several: what crosses between nodes):

- DDP all-reduces every gradient in float32: ``G = 4 N_all`` bytes, of which ring allreduce moves
  ``2(N-1)/N x G`` per node (``clusterctl.results.counters``).
- FSDP (``fully_shard`` per block, the rest in the root's group) all-gathers each block's parameters
  twice (forward, then again in backward after resharding) and the root's once (FSDP2 keeps the root
  gathered from forward to backward), in the gather dtype (2 bytes under bf16/fp16, else 4), and
  reduce-scatters every gradient in float32. An all-gather or a reduce-scatter of ``X`` bytes moves
  ``(N-1)/N x X`` per node each way, so a step moves ``(N-1)/N x (gathered + 4 N_all)``: the counter
  proof's ``2(N-1)/N x G`` with the allreduce-equivalent ``G = (gathered + 4 N_all) / 2``.

**Memory per device** (the refusal before launch): 16 bytes per parameter (float32 weights and
gradients, AdamW's two moments), divided by the world size under FSDP, plus the activations of
Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", section 4.1):
``S B W (34 + 5 A S / W)`` bytes per layer in 16-bit (twice in float32), and the logits' float32 copy and
gradient, ``8 B S V``. With activation checkpointing a layer keeps only its input (``2 S B W``) and one
layer's activations are rebuilt at a time in backward.

**Sizes**: the names of ``SIZES`` or an explicit ``L<layers>-H<heads>-W<width>``
(``clusterctl.inventory.types.gpt_dimensions``: the heads must divide the width).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.inventory.types import GPT_SIZES, gpt_dimensions

VOCAB = 50_257
# name -> (layers, heads, width); a unit test checks they equal the payload's SIZES.
SIZES = GPT_SIZES
ADAM_BYTES_PER_PARAMETER = 4 + 4 + 8  # float32 weight, gradient, two moments


@dataclass(frozen=True)
class GptShape:
    """A GPT's dimensions at a sequence length."""

    layers: int
    heads: int
    width: int
    seq_len: int
    vocab: int = VOCAB

    @classmethod
    def named(cls, size: str, seq_len: int) -> GptShape:
        """The shape of ``size`` (a name of ``SIZES`` or ``L<layers>-H<heads>-W<width>``) at ``seq_len``.

        Raises:
            ValueError: ``size`` is neither (``gpt_dimensions``).
        """
        layers, heads, width = gpt_dimensions(size)
        return cls(layers, heads, width, seq_len)

    @property
    def block_parameters(self) -> int:
        """Parameters of all the blocks together."""
        return self.layers * (12 * self.width**2 + 13 * self.width)

    @property
    def root_parameters(self) -> int:
        """Parameters outside the blocks: both embeddings (the head is tied) and the final LayerNorm."""
        return (self.vocab + self.seq_len) * self.width + 2 * self.width

    @property
    def parameters(self) -> int:
        """Trainable parameters, the tied head once."""
        return self.block_parameters + self.root_parameters

    def flops_per_token(self) -> int:
        """Training FLOPs of one token: ``6 N + 12 L W S``, N without the position embedding."""
        dense = self.parameters - self.seq_len * self.width
        return 6 * dense + 12 * self.layers * self.width * self.seq_len

    def ddp_bytes(self) -> int:
        """Bytes each rank all-reduces per step under DDP: every gradient in float32."""
        return 4 * self.parameters

    def fsdp_gathered_bytes(self, precision: str) -> int:
        """Bytes of parameters all-gathered per step under FSDP: the blocks twice, the root once."""
        return _gather_size(precision) * (2 * self.block_parameters + self.root_parameters)

    def fsdp_split(self, precision: str) -> dict[str, int]:
        """The bytes of a step's FSDP collectives: all-gathered parameters, reduce-scattered float32
        gradients."""
        return {"allgather": self.fsdp_gathered_bytes(precision), "reducescatter": 4 * self.parameters}

    def fsdp_block_messages(self, precision: str) -> dict[str, int]:
        """The message of each FSDP collective for one block (the message most of a step's are):
        its parameters in the gather dtype, its float32 gradients."""
        per_block = self.block_parameters // self.layers
        return {"allgather": _gather_size(precision) * per_block, "reducescatter": 4 * per_block}

    def fsdp_equivalent_bytes(self, precision: str) -> int:
        """The allreduce-equivalent G of one FSDP step: (all-gathered + reduce-scattered float32) / 2."""
        return (self.fsdp_gathered_bytes(precision) + 4 * self.parameters) // 2

    def memory_bytes(self, batch: int, precision: str, *, shards: int, checkpointed: bool = False) -> int:
        """Estimated bytes per device: weights, gradients and AdamW state (over ``shards``), activations.

        ``checkpointed`` (activation checkpointing per block): each block keeps only its input, ``2 S B W``
        bytes in 16-bit (Korthikanti et al. 2022, table 2, "full recomputation"), and one block's full
        activations live again while its backward recomputes them.
        """
        state = ADAM_BYTES_PER_PARAMETER * self.parameters // shards
        s, w = self.seq_len, self.width
        per_layer = s * batch * w * (34 + 5 * self.heads * s // w)
        kept = (self.layers * 2 * s * batch * w + per_layer) if checkpointed else self.layers * per_layer
        activations = kept * (1 if precision in ("bf16", "fp16") else 2)
        logits = 8 * batch * s * self.vocab
        return state + activations + logits


def _gather_size(precision: str) -> int:
    """Bytes per parameter FSDP gathers: 2 under bf16/fp16 (its mixed-precision policy), else 4."""
    return 2 if precision in ("bf16", "fp16") else 4
