"""A Flax NNX model's parameters and statistics as NumPy arrays in the torch layout, and back.

The flax and torch twins use the same attribute names, so the mapping is derived from the flax
variable paths: `blocks/0/attn/qkv/weight` <-> `blocks.0.attn.qkv.weight`. Leaf names and layouts:

    flax                     torch            layout change
    weight (common_flax.Linear) weight        -          (both [out, in])
    kernel (2-D, nnx.Linear) weight           (in, out)  <-> (out, in)   (no zoo model uses it)
    kernel (4-D, Conv)       weight           HWIO       <-> OIHW
    embedding (Embed)        weight           -
    scale (LayerNorm/RMS/BN) weight           -
    mean / var (BatchStat)   running_mean / running_var
    anything else            same name        -

The torch layout (state_dict keys, torch shapes, fp32) is the canonical one: the converters
(`common_convert`), shared initial parameters (`repro.models.init`) and their hash speak it.
This module imports flax, never torch, so a JAX worker can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from repro.models.canonical import check_keys

_TORCH_LEAF = {"kernel": "weight", "embedding": "weight", "scale": "weight",
               "mean": "running_mean", "var": "running_var"}


@dataclass(frozen=True)
class Pair:
    torch: str  # state_dict key
    flax: tuple  # path of the nnx.Variable
    kind: str  # "linear" (transpose), "conv" (HWIO<->OIHW) or "copy"


def pairs(fmodel: nnx.Module) -> list[Pair]:
    """The mapping of every flax Param and BatchStat to its torch state_dict key."""
    out = []
    for path, var in nnx.to_flat_state(nnx.state(fmodel, nnx.Any(nnx.Param, nnx.BatchStat))):
        *prefix, leaf = path
        kind = "copy"
        if leaf == "kernel":
            kind = {2: "linear", 4: "conv"}[len(var.shape)]
        out.append(Pair(".".join([*map(str, prefix), _TORCH_LEAF.get(leaf, leaf)]), tuple(path), kind))
    return out


def to_torch_layout(a: np.ndarray, kind: str) -> np.ndarray:
    if kind == "linear":
        return a.T  # (in, out) -> (out, in)
    if kind == "conv":
        return a.transpose(3, 2, 0, 1)  # HWIO -> OIHW
    return a


def to_flax_layout(a: np.ndarray, kind: str) -> np.ndarray:
    if kind == "linear":
        return a.T
    if kind == "conv":
        return a.transpose(2, 3, 1, 0)  # OIHW -> HWIO
    return a


def variable(fmodel: nnx.Module, path: Iterable) -> nnx.Variable:
    obj = fmodel
    for key in path:
        obj = obj[key] if isinstance(key, int) else getattr(obj, key)
    return obj


def _torch_shape(shape: tuple, kind: str) -> tuple:
    return tuple(to_torch_layout(np.empty(shape, dtype=np.bool_), kind).shape)


def shapes(fmodel: nnx.Module, mapping: list[Pair] | None = None) -> dict[str, tuple]:
    """torch key -> torch-layout shape of every variable (an abstract `nnx.eval_shape` model too)."""
    mapping = pairs(fmodel) if mapping is None else mapping
    return {p.torch: _torch_shape(tuple(variable(fmodel, p.flax).shape), p.kind) for p in mapping}


def read(fmodel: nnx.Module, mapping: list[Pair] | None = None) -> dict[str, np.ndarray]:
    """torch key -> fp32 array in the torch layout, for every Param and BatchStat."""
    mapping = pairs(fmodel) if mapping is None else mapping
    return {p.torch: np.ascontiguousarray(to_torch_layout(np.asarray(variable(fmodel, p.flax)[...], dtype=np.float32), p.kind))
            for p in mapping}


def write(fmodel: nnx.Module, state: Mapping[str, np.ndarray], mapping: list[Pair] | None = None) -> nnx.Module:
    """Set every Param and BatchStat from `state` (torch key -> torch-layout array), in place.

    Fills an abstract `nnx.eval_shape` model too. Every variable must be covered exactly once."""
    mapping = pairs(fmodel) if mapping is None else mapping
    check_keys([p.torch for p in mapping], state)
    for p in mapping:
        var = variable(fmodel, p.flax)
        a = to_flax_layout(np.asarray(state[p.torch]), p.kind)
        if a.shape != var.shape:
            raise ValueError(f"{p.torch} -> {'/'.join(map(str, p.flax))}: shape {a.shape} != {var.shape}")
        var.set_value(jnp.asarray(a, dtype=var.dtype))
    return fmodel
