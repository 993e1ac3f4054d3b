from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import linear
from repro.models.gemm import GEMMDims


class GEMM(nnx.Module):
    def __init__(self, d: GEMMDims, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        self.linear = linear(d.d_in, d.d_out, bias=False, rngs=rngs, dtype=dtype, param_dtype=param_dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear(x)


def build(dims: GEMMDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> GEMM:
    return GEMM(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
