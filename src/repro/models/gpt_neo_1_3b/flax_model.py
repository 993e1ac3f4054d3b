from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from repro.models.gpt2_small.flax_model import GPT
from repro.models.gpt_neo_1_3b import GPTNeoDims


def build(dims: GPTNeoDims, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> GPT:
    return GPT(dims, qkv_bias=False, scale=1.0, window=dims.window, rngs=rngs, dtype=dtype,
               param_dtype=param_dtype)
