"""GPT-2: pre-LN causal decoder, learned positions, output head tied to the token embedding."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import ZooModel
from repro.models.common import attention_flops, attention_params, linear_params

EPS = 1e-5


@dataclass(frozen=True)
class GPT2Dims:
    vocab: int
    seq: int
    ctx: int
    dim: int
    depth: int
    heads: int


class GPT2(ZooModel):
    name = "gpt2_small"
    task = "lm"
    description = "GPT-2 causal LM (pre-LN, learned positions, tied embeddings, exact GELU)"
    dims_type = GPT2Dims
    presets = {
        "tiny": dict(vocab=128, seq=16, ctx=32, dim=32, depth=2, heads=4),
        "small": dict(vocab=50257, seq=1024, ctx=1024, dim=768, depth=12, heads=12),
    }
    qkv_bias = True

    def param_count(self, d):
        dim = d.dim
        block = 4 * dim + attention_params(dim, d.heads, qkv_bias=self.qkv_bias)
        block += linear_params(dim, 4 * dim) + linear_params(4 * dim, dim)
        return (d.vocab + d.ctx) * dim + d.depth * block + 2 * dim

    def flops_per_example(self, d):
        t, dim = d.seq, d.dim
        block = attention_flops(t, dim, d.heads) + 2 * 2 * t * dim * 4 * dim
        return float(d.depth * block + 2 * t * dim * d.vocab)
