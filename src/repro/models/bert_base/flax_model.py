from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.bert_base import EPS, BERTDims
from repro.models.common_flax import MLP, Attention, embed, first_rows, gelu, layer_norm, linear


class Layer(nnx.Module):
    """Post-LN encoder layer: ln1(x + attn(x)), then ln2(x + mlp(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, **kw):
        self.attn = Attention(dim, heads, **kw)
        self.ln1 = layer_norm(dim, EPS, **kw)
        self.mlp = MLP(dim, hidden, **kw)
        self.ln2 = layer_norm(dim, EPS, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Bert(nnx.Module):
    def __init__(self, d: BERTDims, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        dim = d.dim
        self.word_emb = embed(d.vocab, dim, **kw)
        self.pos_emb = embed(d.max_pos, dim, **kw)
        self.type_emb = embed(d.type_vocab, dim, **kw)
        self.emb_ln = layer_norm(dim, EPS, **kw)
        self.layers = nnx.List([Layer(dim, d.heads, d.mlp, **kw) for _ in range(d.depth)])
        self.head_dense = linear(dim, dim, **kw)
        self.head_ln = layer_norm(dim, EPS, **kw)
        self.decoder_bias = nnx.Param(jnp.zeros((d.vocab,), param_dtype))

    def __call__(self, tokens: jax.Array) -> jax.Array:  # tokens [B, T] -> logits [B, T, V]
        t = tokens.shape[1]
        x = self.word_emb(tokens) + first_rows(self.pos_emb, t) + self.type_emb(jnp.zeros_like(tokens))
        x = self.emb_ln(x)
        for layer in self.layers:
            x = layer(x)
        x = self.head_ln(gelu(self.head_dense(x)))
        return self.word_emb.attend(x) + self.decoder_bias[...].astype(x.dtype)


def build(dims: BERTDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> Bert:
    return Bert(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
