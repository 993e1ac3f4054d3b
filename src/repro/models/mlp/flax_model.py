from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import linear
from repro.models.mlp import MLPDims


class MLP(nnx.Module):
    def __init__(self, in_dim: int, width: int, depth: int, classes: int, *, rngs: nnx.Rngs,
                 dtype=None, param_dtype=jnp.float32):
        dims = [in_dim] + [width] * depth
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.hidden = nnx.List([linear(i, o, **kw) for i, o in zip(dims[:-1], dims[1:])])
        self.head = linear(dims[-1], classes, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.hidden:
            x = nnx.gelu(layer(x), approximate=False)
        return self.head(x)


def build(dims: MLPDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> MLP:
    return MLP(dims.in_dim, dims.width, dims.depth, dims.classes, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
