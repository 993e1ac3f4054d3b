from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import Block, causal_mask, embed, first_rows, layer_norm
from repro.models.gpt2_small import EPS, GPT2Dims


class GPT(nnx.Module):
    """GPT-2; with `qkv_bias=False, scale=1.0, window=w` it is GPT-Neo (odd layers local)."""

    def __init__(self, d: GPT2Dims, *, qkv_bias: bool = True, scale: float | None = None,
                 window: int | None = None, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        dim = d.dim
        self.window = window
        self.wte = embed(d.vocab, dim, **kw)
        self.wpe = embed(d.ctx, dim, **kw)
        self.blocks = nnx.List([Block(dim, d.heads, 4 * dim, EPS, qkv_bias=qkv_bias, scale=scale, **kw)
                                for _ in range(d.depth)])
        self.ln_f = layer_norm(dim, EPS, **kw)

    def __call__(self, tokens: jax.Array) -> jax.Array:  # tokens [B, T] -> logits [B, T, V]
        t = tokens.shape[1]
        x = self.wte(tokens) + first_rows(self.wpe, t)
        causal = causal_mask(t)
        local = causal_mask(t, self.window) if self.window else causal
        for i, block in enumerate(self.blocks):
            x = block(x, local if i % 2 else causal)
        return self.wte.attend(self.ln_f(x))


def build(dims: GPT2Dims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> GPT:
    return GPT(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
