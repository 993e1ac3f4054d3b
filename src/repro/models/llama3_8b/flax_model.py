from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common import rope_tables
from repro.models.common_flax import Attention, causal_mask, embed, linear
from repro.models.llama3_8b import EPS, LlamaDims


def rms_norm(dim: int, **kw) -> nnx.RMSNorm:
    return nnx.RMSNorm(dim, epsilon=EPS, **kw)


class SwiGLU(nnx.Module):
    def __init__(self, dim: int, hidden: int, **kw):
        self.gate = linear(dim, hidden, bias=False, **kw)
        self.up = linear(dim, hidden, bias=False, **kw)
        self.down = linear(hidden, dim, bias=False, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):
    def __init__(self, d: LlamaDims, **kw):
        self.attn_norm = rms_norm(d.dim, **kw)
        self.attn = Attention(d.dim, d.heads, kv_heads=d.kv_heads, qkv_bias=False, out_bias=False, **kw)
        self.mlp_norm = rms_norm(d.dim, **kw)
        self.mlp = SwiGLU(d.dim, d.hidden, **kw)

    def __call__(self, x: jax.Array, mask: jax.Array, rope) -> jax.Array:
        x = x + self.attn(self.attn_norm(x), mask, rope)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nnx.Module):
    def __init__(self, d: LlamaDims, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        self.head_dim, self.theta = d.dim // d.heads, float(d.theta)
        self.embed = embed(d.vocab, d.dim, **kw)
        self.blocks = nnx.List([Block(d, **kw) for _ in range(d.depth)])
        self.norm = rms_norm(d.dim, **kw)
        self.lm_head = linear(d.dim, d.vocab, bias=False, **kw)

    def __call__(self, tokens: jax.Array) -> jax.Array:  # tokens [B, T] -> logits [B, T, V]
        t = tokens.shape[1]
        rope = rope_tables(t, self.head_dim, self.theta)
        mask = causal_mask(t)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask, rope)
        return self.lm_head(self.norm(x))


def build(dims: LlamaDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> Llama:
    return Llama(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
