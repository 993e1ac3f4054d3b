"""Flax NNX building blocks shared by the models; `common_torch.py` mirrors them name for name.

Attribute names are the contract with the torch twins: a flax variable at path
`blocks/0/attn/qkv/weight` is the torch tensor `blocks.0.attn.qkv.weight` (see common_convert.py).
Every layer takes `dtype` (compute) and `param_dtype` (storage) for the precision policy.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

Dtype = Any
EMBED_INIT = nnx.initializers.normal(0.02)


class Linear(nnx.Module):
    """y = x W^T + b with W stored [out, in], as torch's nn.Linear, where nnx.Linear stores [in, out].

    Why not nnx.Linear: on XLA's CPU backend the weight gradient of an [in, out] kernel is a
    dot with the lhs contracted on its first dimension, which XLA leaves to Eigen; with [out, in]
    it is dy^T x, a plain GEMM that XLA hands to its YNNPACK fusions. HF's Flax GPT-2 stores its
    kernels [out, in] (Conv1D) and so its step took 0.81x ours (benchmarks/impl_speed.py). The
    initialiser is nnx.Linear's (LeCun normal over fan_in = in, zero bias)."""

    def __init__(self, d_in: int, d_out: int, *, bias: bool = True, rngs: nnx.Rngs, dtype: Dtype = None,
                 param_dtype: Dtype = jnp.float32):
        init = nnx.initializers.lecun_normal(in_axis=-1, out_axis=-2)
        self.weight = nnx.Param(init(rngs.params(), (d_out, d_in), param_dtype))
        self.bias = nnx.Param(jnp.zeros((d_out,), param_dtype)) if bias else None
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        w, b = self.weight[...], self.bias[...] if self.bias is not None else None
        x, w, b = nnx.nn.dtypes.promote_dtype((x, w, b), dtype=self.dtype)
        y = jax.lax.dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())))
        return y if b is None else y + b


def linear(d_in: int, d_out: int, *, bias: bool = True, rngs: nnx.Rngs, dtype: Dtype = None,
           param_dtype: Dtype = jnp.float32) -> Linear:
    return Linear(d_in, d_out, bias=bias, dtype=dtype, param_dtype=param_dtype, rngs=rngs)


def layer_norm(dim: int, eps: float, *, rngs: nnx.Rngs, dtype: Dtype = None,
               param_dtype: Dtype = jnp.float32) -> nnx.LayerNorm:
    # One-pass variance E[x^2]-E[x]^2, as HF's Flax models (flax's default). The two-pass form
    # (torch's) made XLA's CPU fusions recompute the whole residual stream in the backward pass:
    # ViT's train step took 1.56x HF's (benchmarks/impl_speed.py); fp32 parity holds (tests).
    return nnx.LayerNorm(dim, epsilon=eps, use_fast_variance=True, dtype=dtype,
                         param_dtype=param_dtype, rngs=rngs)


def embed(num: int, dim: int, *, rngs: nnx.Rngs, dtype: Dtype = None,
          param_dtype: Dtype = jnp.float32) -> nnx.Embed:
    return nnx.Embed(num, dim, embedding_init=EMBED_INIT, dtype=dtype, param_dtype=param_dtype,
                     rngs=rngs)


def first_rows(e: nnx.Embed, n: int) -> jax.Array:
    """`e(jnp.arange(n))` as a slice (learned positions 0..n-1): the same numbers, but the
    gradient of a slice is a pad where a take's is a bounds-checked scatter-add."""
    table = e.embedding[...]
    return table[:n].astype(e.dtype or table.dtype)


def gelu(x: jax.Array) -> jax.Array:
    return jax.nn.gelu(x, approximate=False)  # exact erf form, torch's default


def causal_mask(t: int, window: int | None = None) -> jax.Array:
    """[t, t] bool, True where query i may attend key j: j <= i (and i - j < window if local)."""
    i, j = jnp.arange(t)[:, None], jnp.arange(t)[None, :]  # iota under jit, not a baked constant
    keep = j <= i
    if window is not None:
        keep = keep & ((i - j) < window)
    return jnp.asarray(keep)


def attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None,
              scale: float = 1.0) -> jax.Array:
    """Eager attention softmax((q * scale) k^T) v. q [B,T,H,Dh], k/v [B,S,Hkv,Dh], mask [T,S] bool;
    returns [B,T,H,Dh].

    Heads stay where the projections put them (no transposes around the einsums) and the scale
    goes on q, not on the T x S scores: HF's Flax attention does both, and so XLA's step is no
    larger than theirs. Grouped-query attention when Hkv < H: kv head j serves q heads
    j*g .. j*g+g-1. Softmax in float32; masked scores get the dtype's most negative finite value added."""
    groups = q.shape[2] // k.shape[2]
    if groups > 1:
        k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    if scale != 1.0:
        q = q * jnp.asarray(scale, q.dtype)
    s = jnp.einsum("bthd,bshd->bhts", q, k)
    if mask is not None:  # an additive bias, as HF's Flax models: its gradient is the identity, a where's a select
        s = s + jnp.where(mask, 0, jnp.finfo(s.dtype).min).astype(s.dtype)
    p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(v.dtype)
    return jnp.einsum("bhts,bshd->bthd", p, v)


def apply_rope(x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
    """Rotary embedding, rotate-half layout. x [B,T,H,Dh], cos/sin [T,Dh]."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos[:, None].astype(x.dtype) + rotated * sin[:, None].astype(x.dtype)


class Attention(nnx.Module):
    """Multi-head (grouped-query if kv_heads < heads) self-attention: one fused q|k|v projection
    (`qkv`, output columns q then k then v, as GPT-2's c_attn) and the output projection `o`.

    Fused because three projections of the same input cost three matmuls forward and six
    backward where one costs one and two: with separate q, k, v our JAX GPT-2 step took 1.23x
    HF's Flax GPT-2 (which fuses; benchmarks/impl_speed.py)."""

    def __init__(self, dim: int, heads: int, *, kv_heads: int | None = None, qkv_bias: bool = True,
                 out_bias: bool = True, scale: float | None = None, rngs: nnx.Rngs,
                 dtype: Dtype = None, param_dtype: Dtype = jnp.float32):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads or heads, dim // heads
        self.scale = self.head_dim**-0.5 if scale is None else scale
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        self.qkv = linear(dim, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=qkv_bias, **kw)
        self.o = linear(self.heads * self.head_dim, dim, bias=out_bias, **kw)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None,
                 rope: tuple[np.ndarray, np.ndarray] | None = None) -> jax.Array:
        b, t, _ = x.shape

        def split(y, n):  # [B, T, n*Dh] -> [B, T, n, Dh]
            return y.reshape(b, t, n, self.head_dim)

        q_end = self.heads * self.head_dim
        q, k, v = jnp.split(self.qkv(x), [q_end, q_end + self.kv_heads * self.head_dim], axis=-1)
        q, k, v = split(q, self.heads), split(k, self.kv_heads), split(v, self.kv_heads)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        y = attention(q, k, v, mask, self.scale)
        return self.o(y.reshape(b, t, -1))


class MLP(nnx.Module):
    """Linear -> exact GELU -> Linear."""

    def __init__(self, dim: int, hidden: int, *, rngs: nnx.Rngs, dtype: Dtype = None,
                 param_dtype: Dtype = jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        self.fc = linear(dim, hidden, **kw)
        self.proj = linear(hidden, dim, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.proj(gelu(self.fc(x)))


class Block(nnx.Module):
    """Pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (ViT, GPT-2, GPT-Neo)."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float, *, qkv_bias: bool = True,
                 scale: float | None = None, rngs: nnx.Rngs, dtype: Dtype = None,
                 param_dtype: Dtype = jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        self.ln1 = layer_norm(dim, eps, **kw)
        self.attn = Attention(dim, heads, qkv_bias=qkv_bias, scale=scale, **kw)
        self.ln2 = layer_norm(dim, eps, **kw)
        self.mlp = MLP(dim, hidden, **kw)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))
