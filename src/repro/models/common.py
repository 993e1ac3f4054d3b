"""Framework-free pieces shared by the zoo's models: FLOP/param arithmetic and rotary tables.

Only NumPy here: a model's `__init__.py` imports this, and must stay framework-free.
FLOP convention: forward FLOPs of matmuls and convolutions only, a multiply-add counted as 2;
attention's score (QK^T) and value (PV) matmuls are counted over the full T x T square, because
the eager attention computes all of it even where a causal or local mask throws it away.
Norms, activations, softmax, embedding lookups and residual adds are not counted.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def linear_params(d_in: int, d_out: int, bias: bool = True) -> int:
    return d_in * d_out + (d_out if bias else 0)


def attention_params(dim: int, heads: int, kv_heads: int | None = None, *,
                     qkv_bias: bool = True, out_bias: bool = True) -> int:
    """q, k, v and output projections (`repro.models.common_*.Attention`)."""
    hd = dim // heads
    kv = (kv_heads or heads) * hd
    return (linear_params(dim, heads * hd, qkv_bias) + 2 * linear_params(dim, kv, qkv_bias)
            + linear_params(heads * hd, dim, out_bias))


def attention_flops(seq: int, dim: int, heads: int, kv_heads: int | None = None) -> float:
    """Forward FLOPs of one self-attention layer on one sequence of `seq` tokens."""
    hd = dim // heads
    kv = (kv_heads or heads) * hd
    proj = 2 * seq * dim * (2 * heads * hd + 2 * kv)  # q, o and k, v projections
    scores_and_values = 2 * 2 * heads * seq * seq * hd
    return float(proj + scores_and_values)


def rope_tables(seq: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [seq, head_dim] for rotary embeddings, rotate-half layout (HF Llama).

    Computed once in float64 NumPy so both frameworks use bit-identical tables."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
