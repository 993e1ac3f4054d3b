"""The zoo's models: `repro.models.api.Model` subclasses, one package folder each.

A zoo model is one folder, `repro/models/<name>/`:
- `__init__.py` declares its class, a `ZooModel` subclass (name, task, presets, the input shape,
  its analytic sizes), and its dimensions' frozen dataclass, the class's `dims_type`: one field per
  preset key, no defaults (a preset's values are written once, in `presets`); every method and both
  builders read the dimensions as its attributes (`d.width`); the registry (`repro.models`) finds
  the class there;
- `flax_model.py` has `build(dims: <its dims_type>, rngs: nnx.Rngs) -> nnx.Module`;
- `torch_model.py` has `build(dims: <its dims_type>) -> torch.nn.Module`.
Add the folder and its `conf/model/<name>.yaml`: the registry finds the folder by its two twins.

What a zoo model has beyond a user's model: the twins share attribute names, so their weights are
exchanged by path (`state_flax.read`/`write`, the canonical torch layout) rather than by the
declaration-order pairing a user's model gets; it declares fsdp and tp partitioning (JAX shards by
its generic rules; `torch_tp` where its layers have a torch tensor-parallel plan) and runs under
PyTorch/XLA. The framework modules are imported only by the worker of that framework, so a JAX run
never imports torch and vice versa.

Batches are made once in NumPy from the run's seed, in the JAX layout (NHWC images); the torch
backend transposes images to NCHW when it puts them on the device, outside the timed loop. Both
frameworks therefore see the same numbers.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any, ClassVar, Mapping

from repro.models.api import Model, token_batch


class ZooModel(Model):
    """A model of the zoo (module docstring): the builders are the folder's `build` functions."""

    source = "zoo"
    by_path = True  # the twins share attribute names: weights exchanged by path (repro.models.api)
    default_preset = "tiny"
    partitioning: Mapping[str, bool] = {"fsdp": True, "tp": True}
    torch_xla = True
    dims_type: ClassVar[type]  # the folder's frozen dataclass of dimensions (module docstring)

    def dims_of(self, values: Any) -> Any:
        """The dimensions as `dims_type` (the values a config records: a JSON list is a tuple again)."""
        if isinstance(values, self.dims_type):
            return values
        fields = [f.name for f in dataclasses.fields(self.dims_type)]
        unknown, missing = [k for k in values if k not in fields], [k for k in fields if k not in values]
        if unknown or missing:
            raise ValueError(f"model {self.name}: its dimensions are {', '.join(fields)}; "
                             + "; ".join(f"{what} {', '.join(keys)}" for what, keys in
                                         (("unknown:", unknown), ("missing:", missing)) if keys))
        return self.dims_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def module(self, family: str) -> ModuleType:
        """The folder's framework module: family "flax" or "torch" (imported here, on first use)."""
        return importlib.import_module(f"{type(self).__module__}.{family}_model")

    def flax_module(self, dims, rngs, *, dtype=None, param_dtype=None):
        kw = {} if param_dtype is None else {"param_dtype": param_dtype}
        return self.module("flax").build(dims, rngs, dtype=dtype, **kw)

    def torch_module(self, dims):
        return self.module("torch").build(dims)

    def make_batch(self, d, batch_size, rng):
        """The protocol's synthetic batch (`Model.make_batch`), from the typed dimensions."""
        if self.task == "lm":
            return token_batch(rng, batch_size, d.vocab, d.seq)
        return self.shaped_batch(d, batch_size, rng, d.classes if self.task == "classify" else None)


class SequenceBlock(ZooModel):
    """A transformer block alone on [B, seq, dim] (`ffn`, `mha`): inputs and regression targets of
    that shape, run at batch 4 (tiny) or 8 (large)."""

    task = "regress"
    batch_sizes = {"tiny": 4, "large": 8}

    def input_shape(self, d):
        return (d.seq, d.dim)
