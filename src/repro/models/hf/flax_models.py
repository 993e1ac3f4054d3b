"""transformers' Flax (linen) classes as NNX modules, behind the native `flax_model.build` signature.

`nnx.bridge.ToNNX` holds the linen variables as NNX state (params -> nnx.Param, batch_stats ->
nnx.BatchStat), so the JAX backend splits, differentiates, donates and updates them exactly as
it does our own models'. The linen module is called the way HF's own wrapper calls it (all-ones
attention mask, positions 0..T-1, no dropout), inside the jitted step.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from repro.models.hf import CLASSES, transformers_for

transformers = transformers_for("flax")  # before configs.py imports it: a JAX worker never imports torch
from repro.models.hf.configs import config_for  # noqa: E402


class HFModel(nnx.Module):
    def __init__(self, entry, dims: Any, *, rngs: nnx.Rngs, dtype=jnp.float32):
        cls = getattr(transformers, CLASSES[entry.name][1])
        # The linen module alone: the FlaxPreTrainedModel wrapper traces a whole init in its constructor
        # (jax.eval_shape, even with _do_init=False), a second trace of what lazy_init traces below.
        module = cls.module_class(config=config_for(entry.name, dims), dtype=dtype or jnp.float32)
        self.image = entry.image_input
        self.batch_norm = entry.name == "resnet50"
        self.use_running_average = False  # nnx's .eval() sets it: BatchNorm then uses its running stats
        self.hf = nnx.bridge.ToNNX(module, rngs=rngs)
        if self.image:
            example = jnp.zeros((1, dims.image, dims.image, dims.channels), jnp.float32)
        else:
            example = jnp.zeros((1, dims.seq), jnp.int32)
        self.hf.lazy_init(*self._args(example), deterministic=True)
        self.hf.to_nnx__rngs = None  # no dropout: the step draws no random numbers

    def _args(self, x: jax.Array) -> tuple:
        if self.image:
            return (x,)  # the linen module takes NHWC (HF's wrapper transposes NCHW to it)
        b, t = x.shape
        mask, positions = jnp.ones((b, t), jnp.int32), jnp.broadcast_to(jnp.arange(t), (b, t))
        if self.hf.to_nnx__module.__class__.__name__.startswith("FlaxBert"):
            heads = self.hf.to_nnx__module.config
            return x, mask, jnp.zeros_like(x), positions, jnp.ones((heads.num_hidden_layers, heads.num_attention_heads))
        return x, mask, positions

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.batch_norm:  # training mode updates the running statistics (the batch_stats collection)
            train = not self.use_running_average
            return self.hf(x, deterministic=not train, mutable=["batch_stats"] if train else False).logits
        return self.hf(*self._args(x), deterministic=True).logits


def build(entry, dims: Any, rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> HFModel:
    if jnp.dtype(param_dtype) != jnp.float32:
        raise ValueError(f"model.impl=hf with JAX keeps float32 parameters, got {param_dtype}")
    return HFModel(entry, dims, rngs=rngs, dtype=dtype)
