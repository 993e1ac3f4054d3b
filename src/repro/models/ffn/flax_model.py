from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import MLP
from repro.models.ffn import FFNDims


def build(dims: FFNDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> MLP:
    return MLP(dims.dim, dims.hidden, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
