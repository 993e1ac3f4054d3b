"""Weight copying between a Flax NNX model and its PyTorch twin.

The twins use the same attribute names, so the mapping is derived from the flax variable paths:
`blocks/0/attn/q/kernel` <-> `blocks.0.attn.q.weight`. Leaf names and layouts:

    flax                     torch            layout change
    kernel (2-D, Linear)     weight           (in, out)  <-> (out, in)
    kernel (4-D, Conv)       weight           HWIO       <-> OIHW
    embedding (Embed)        weight           -
    scale (LayerNorm/RMS/BN) weight           -
    mean / var (BatchStat)   running_mean / running_var
    anything else            same name        -

Every copy checks that each side is covered exactly once and that shapes agree, so a model
whose twins drifted apart fails loudly instead of copying half its weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import jax.numpy as jnp
import numpy as np
import torch
from flax import nnx

_TORCH_LEAF = {"kernel": "weight", "embedding": "weight", "scale": "weight",
               "mean": "running_mean", "var": "running_var"}
_SKIP_TORCH = ("num_batches_tracked",)


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


def _torch_state(tmodel: torch.nn.Module, mapping: list[Pair]) -> dict[str, torch.Tensor]:
    state = {k: v for k, v in tmodel.state_dict().items() if not k.endswith(_SKIP_TORCH)}
    keys = [p.torch for p in mapping]
    missing, extra = set(keys) - set(state), set(state) - set(keys)
    if missing or extra or len(set(keys)) != len(keys):
        raise ValueError(f"flax/torch twins differ: only in flax {sorted(missing)}, "
                         f"only in torch {sorted(extra)}, duplicated: {len(keys) - len(set(keys))}")
    return state


def torch_to_flax(tmodel: torch.nn.Module, fmodel: nnx.Module, mapping: list[Pair] | None = None):
    """Copy every torch parameter/buffer into the flax model (in place); returns fmodel."""
    mapping = pairs(fmodel) if mapping is None else mapping
    state = _torch_state(tmodel, mapping)
    for p in mapping:
        var = variable(fmodel, p.flax)
        a = to_flax_layout(state[p.torch].detach().cpu().float().numpy(), p.kind)
        if a.shape != var.shape:
            raise ValueError(f"{p.torch} -> {'/'.join(map(str, p.flax))}: shape {a.shape} != {var.shape}")
        var.set_value(jnp.asarray(a, dtype=var.dtype))  # also fills an nnx.eval_shape (abstract) model
    return fmodel


def flax_to_torch(fmodel: nnx.Module, tmodel: torch.nn.Module, mapping: list[Pair] | None = None):
    """Copy every flax Param/BatchStat into the torch model (in place); returns tmodel."""
    mapping = pairs(fmodel) if mapping is None else mapping
    state = _torch_state(tmodel, mapping)
    with torch.no_grad():
        for p in mapping:
            a = to_torch_layout(np.asarray(variable(fmodel, p.flax)[...], dtype=np.float32), p.kind)
            dst = state[p.torch]
            if tuple(a.shape) != tuple(dst.shape):
                raise ValueError(f"{'/'.join(map(str, p.flax))} -> {p.torch}: shape {a.shape} != {tuple(dst.shape)}")
            dst.copy_(torch.from_numpy(np.array(a)))  # np.array: a writable, contiguous copy
    return tmodel
