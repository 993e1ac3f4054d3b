from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import Attention
from repro.models.mha import MHADims


def build(dims: MHADims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> Attention:
    return Attention(dims.dim, dims.heads, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
