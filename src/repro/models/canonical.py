"""A model's state in the canonical layout: torch state_dict keys and shapes, fp32 NumPy arrays.

Framework-free (NumPy only), so both workers use it:
- `check_keys`: one side's keys cover the other's exactly once (the converters' guard);
- `draw`: `run.init=shared`, the initial parameters drawn once from the run's seed;
- `sha256`: the hash of a state, the same in every framework for the same numbers.

`state_flax` and `state_torch` read and write this layout from and into each framework.
"""

from __future__ import annotations

import hashlib
import math
from typing import Iterable, Mapping

import numpy as np


OTHER_STD = 0.02  # learned tokens and positions (ViT's cls/pos): the usual BERT/ViT scale


def init_mode(config) -> str:
    """run.init of a config; records made before run.init existed ran `native`."""
    return config.run.init


def check_keys(keys: list[str], torch_keys: Iterable[str]) -> None:
    """Each torch key covered exactly once by the flax side's keys, or a ValueError naming the rest."""
    torch_keys = set(torch_keys)
    missing, extra = set(keys) - torch_keys, torch_keys - set(keys)
    if missing or extra or len(set(keys)) != len(keys):
        raise ValueError(f"flax/torch twins differ: only in flax {sorted(missing)}, "
                         f"only in torch {sorted(extra)}, duplicated: {len(keys) - len(set(keys))}")


def rule(key: str, shape: tuple) -> str:
    """The init rule of one entry, from its torch key and shape alone (so both frameworks agree):
    running_mean, biases -> zeros; running_var, 1-D weights (norm scales) -> ones; weights of
    2+ dims (Linear (out, in), Conv (out, in, kh, kw), Embedding (n, dim)) -> normal with std
    1/sqrt(fan_in), fan_in = the product of all but the first dim (LeCun, Flax's default
    variance); any other array (learned tokens, positions) -> normal with std OTHER_STD."""
    leaf = key.rsplit(".", 1)[-1]
    if leaf == "running_mean" or leaf.endswith("bias"):
        return "zeros"
    if leaf == "running_var" or (leaf == "weight" and len(shape) == 1):
        return "ones"
    if leaf == "weight":
        return "lecun_normal"
    return "normal"


def _rng(seed: int, key: str) -> np.random.Generator:
    """One generator per entry, from the run's seed and the key: independent of order and of
    the other entries (big_vision's fold_in, by name)."""
    digest = hashlib.sha256(f"repro:{seed}:init:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def draw(shapes: Mapping[str, tuple], seed: int) -> dict[str, np.ndarray]:
    """The shared initial state: torch key -> fp32 array, the same numbers on every machine."""
    out = {}
    for key, shape in shapes.items():
        kind = rule(key, shape)
        if kind == "zeros":
            out[key] = np.zeros(shape, np.float32)
        elif kind == "ones":
            out[key] = np.ones(shape, np.float32)
        else:
            std = 1 / math.sqrt(math.prod(shape[1:])) if kind == "lecun_normal" else OTHER_STD
            out[key] = (_rng(seed, key).standard_normal(shape) * std).astype(np.float32)
    return out


def sha256(state: Mapping[str, np.ndarray]) -> str:
    """sha256 over the entries in key order: key, shape and the fp32 bytes (C order)."""
    h = hashlib.sha256()
    for key in sorted(state):
        a = np.ascontiguousarray(state[key], dtype=np.float32)
        h.update(f"{key}:float32:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def canonical_key(shape: tuple, leaf: str, seen: dict) -> str:
    """The default converter's key of one tensor: its torch-layout shape, its kind and its rank
    among the tensors of that shape and kind in declaration order (`16x3x3x3#1.weight`). Both
    frameworks compute it alone; `canonical.rule` reads the kind from the part after the dot."""
    sig = ("x".join(map(str, shape)) or "scalar", leaf)
    k = seen.get(sig, 0)
    seen[sig] = k + 1
    return f"{sig[0]}#{k}.{leaf}"
