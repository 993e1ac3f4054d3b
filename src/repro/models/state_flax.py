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
    for key in path:  # a linen module bridged into NNX (model.impl=hf) holds its variables in dicts
        obj = obj[key] if isinstance(key, int) or isinstance(obj, dict) else getattr(obj, key)
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


# ---- the default converter of a workload outside the zoo (repro.models.api.Model) ------------
# Its flax and torch twins need not share attribute names: tensors pair by torch-layout shape and
# kind in declaration order (`canonical.canonical_key`). nnx's own state is sorted by name, so the
# declaration order is read from the modules' attributes (`vars`, insertion order).

def _kind(leaf: str, ndim: int) -> str:
    if leaf == "kernel":
        return {2: "linear", 3: "conv1d", 4: "conv"}.get(ndim, "copy")
    return "copy"


def ordered(fmodel: nnx.Module) -> list[tuple[str, str, nnx.Variable]]:
    """(canonical key, flax path, variable) of every Param and BatchStat in declaration order."""
    from repro.models.canonical import canonical_key

    out, seen = [], {}

    def walk(obj, prefix: str) -> None:
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) \
            else ((k, v) for k, v in vars(obj).items() if not str(k).startswith("_"))
        for name, value in items:
            path = f"{prefix}{name}"
            if isinstance(value, (nnx.Param, nnx.BatchStat)):
                kind = _kind(str(name), len(value.shape))
                shape = _torch_shape(tuple(value.shape), kind) if kind != "conv1d" else tuple(value.shape)[::-1]
                out.append((canonical_key(shape, _TORCH_LEAF.get(str(name), str(name)), seen), path, value))
            elif isinstance(value, (nnx.Module, dict, list, tuple)):
                walk(value, path + "/")

    walk(fmodel, "")
    return out


def _conv1d_to_torch(a: np.ndarray) -> np.ndarray:
    return a.transpose(2, 1, 0)  # (W, I, O) -> (O, I, W)


def _layout_to_torch(a: np.ndarray, name: str) -> np.ndarray:
    kind = _kind(name.rsplit("/", 1)[-1], a.ndim)
    return _conv1d_to_torch(a) if kind == "conv1d" else to_torch_layout(a, kind)


def _layout_to_flax(a: np.ndarray, name: str) -> np.ndarray:
    kind = _kind(name.rsplit("/", 1)[-1], a.ndim)
    return a.transpose(2, 1, 0) if kind == "conv1d" else to_flax_layout(a, kind)


def shapes_ordered(fmodel: nnx.Module) -> dict[str, tuple]:
    return {k: tuple(int(n) for n in k.split("#", 1)[0].split("x")) if not k.startswith("scalar") else ()
            for k, _, _ in ordered(fmodel)}


def read_ordered(fmodel: nnx.Module) -> dict[str, np.ndarray]:
    return {k: np.ascontiguousarray(_layout_to_torch(np.asarray(v[...], dtype=np.float32), path))
            for k, path, v in ordered(fmodel)}


def write_ordered(fmodel: nnx.Module, state: Mapping[str, np.ndarray]) -> nnx.Module:
    entries = ordered(fmodel)
    check_keys([k for k, _, _ in entries], state)
    for k, path, var in entries:
        a = _layout_to_flax(np.asarray(state[k]), path)
        if a.shape != var.shape:
            raise ValueError(f"{k} -> {path}: shape {a.shape} != {var.shape}")
        var.set_value(jnp.asarray(a, dtype=var.dtype))
    return fmodel
