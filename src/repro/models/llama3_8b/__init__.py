"""LLaMA 3 (8B): pre-RMSNorm decoder, rotary positions, grouped-query attention, SwiGLU MLP,
no biases, untied output head. Plain RoPE with theta 500000 (no 3.1 long-context rescaling)."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import ZooModel
from repro.models.common import attention_flops, attention_params

EPS = 1e-5


@dataclass(frozen=True)
class LlamaDims:
    vocab: int
    seq: int
    dim: int
    depth: int
    heads: int
    kv_heads: int
    hidden: int
    theta: float


class Llama3(ZooModel):
    name = "llama3_8b"
    task = "lm"
    description = "LLaMA-3 causal LM (RMSNorm, RoPE, GQA, SwiGLU, untied head)"
    dims_type = LlamaDims
    presets = {
        "tiny": dict(vocab=128, seq=16, dim=32, depth=2, heads=4, kv_heads=2, hidden=64, theta=500000.0),
        "8b": dict(vocab=128256, seq=2048, dim=4096, depth=32, heads=32, kv_heads=8, hidden=14336,
                   theta=500000.0),
    }

    def param_count(self, d):
        dim = d.dim
        attn = attention_params(dim, d.heads, d.kv_heads, qkv_bias=False, out_bias=False)
        block = 2 * dim + attn + 3 * dim * d.hidden
        return 2 * d.vocab * dim + d.depth * block + dim

    def flops_per_example(self, d):
        t, dim = d.seq, d.dim
        block = attention_flops(t, dim, d.heads, d.kv_heads) + 3 * 2 * t * dim * d.hidden
        return float(d.depth * block + 2 * t * dim * d.vocab)
