"""A PyTorch model's state in the canonical layout (torch key -> fp32 NumPy array), and back.

`num_batches_tracked` is torch's own bookkeeping with no flax twin (BatchNorm here uses a
fixed momentum), so it is left out. This module imports torch, never flax.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from repro.models.canonical import check_keys

SKIP = ("num_batches_tracked",)


def _state(tmodel: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in tmodel.state_dict().items() if not k.endswith(SKIP)}


def shapes(tmodel: torch.nn.Module) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in _state(tmodel).items()}


def read(tmodel: torch.nn.Module) -> dict[str, np.ndarray]:
    """torch key -> fp32 NumPy copy of every parameter and buffer."""
    return {k: v.detach().cpu().float().numpy().copy() for k, v in _state(tmodel).items()}


def write(tmodel: torch.nn.Module, state: Mapping[str, np.ndarray]) -> torch.nn.Module:
    """Copy `state` into the model's parameters and buffers in place (cast to their dtype).

    Every entry must be covered exactly once and with its shape, else a ValueError naming it."""
    dst = _state(tmodel)
    check_keys(list(state), dst)
    with torch.no_grad():
        for key, a in state.items():
            if tuple(a.shape) != tuple(dst[key].shape):
                raise ValueError(f"{key}: shape {tuple(a.shape)} != {tuple(dst[key].shape)}")
            dst[key].copy_(torch.from_numpy(np.array(a)))  # np.array: a writable, contiguous copy
    return tmodel


# ---- the default converter of a workload outside the zoo (repro.models.api.Model) ------------

def ordered(tmodel: torch.nn.Module) -> list[tuple[str, str]]:
    """(canonical key, state_dict key) of every parameter and buffer in declaration order."""
    from repro.models.canonical import canonical_key

    seen: dict = {}
    return [(canonical_key(tuple(v.shape), k.rsplit(".", 1)[-1], seen), k) for k, v in _state(tmodel).items()]


def shapes_ordered(tmodel: torch.nn.Module) -> dict[str, tuple]:
    state = _state(tmodel)
    return {c: tuple(state[k].shape) for c, k in ordered(tmodel)}


def read_ordered(tmodel: torch.nn.Module) -> dict[str, np.ndarray]:
    state = read(tmodel)
    return {c: state[k] for c, k in ordered(tmodel)}


def write_ordered(tmodel: torch.nn.Module, state: Mapping[str, np.ndarray]) -> torch.nn.Module:
    names = dict(ordered(tmodel))
    check_keys(list(names), state)
    return write(tmodel, {names[c]: a for c, a in state.items()})
