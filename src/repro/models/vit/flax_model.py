from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import EMBED_INIT, Block, layer_norm, linear
from repro.models.vit import EPS, ViTDims


class ViT(nnx.Module):
    def __init__(self, d: ViTDims, *, rngs: nnx.Rngs, dtype=None, param_dtype=jnp.float32):
        kw = dict(rngs=rngs, dtype=dtype, param_dtype=param_dtype)
        w, p = d.width, d.patch
        tokens = (d.image // p) ** 2 + 1
        self.patch = nnx.Conv(d.channels, w, (p, p), strides=(p, p), padding="VALID", **kw)
        self.cls = nnx.Param(EMBED_INIT(rngs.params(), (1, 1, w), param_dtype))
        self.pos = nnx.Param(EMBED_INIT(rngs.params(), (1, tokens, w), param_dtype))
        self.blocks = nnx.List([Block(w, d.heads, d.mlp, EPS, **kw) for _ in range(d.depth)])
        self.ln = layer_norm(w, EPS, **kw)
        self.head = linear(w, d.classes, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:  # x [B, H, W, C]
        x = self.patch(x)
        b, _, _, w = x.shape
        x = x.reshape(b, -1, w)
        cls = jnp.broadcast_to(self.cls[...].astype(x.dtype), (b, 1, w))
        x = jnp.concatenate([cls, x], axis=1) + self.pos[...].astype(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])


def build(dims: ViTDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> ViT:
    return ViT(dims, rngs=rngs, dtype=dtype, param_dtype=param_dtype)
