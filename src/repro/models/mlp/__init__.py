"""A plain MLP classifier: Linear → GELU repeated `depth` times, then a Linear head."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from repro.models.base import ModelEntry, random_classification

PRESETS = {
    "tiny": dict(in_dim=64, width=128, depth=2, classes=10),
    "digits": dict(in_dim=64, width=128, depth=2, classes=10),  # data=digits: 8×8 flattened
    "small": dict(in_dim=784, width=512, depth=3, classes=10),
    "base": dict(in_dim=1024, width=2048, depth=4, classes=1000),
}


def _layer_dims(d: Mapping[str, Any]) -> list[tuple[int, int]]:
    ins = [d["in_dim"]] + [d["width"]] * d["depth"]
    outs = [d["width"]] * d["depth"] + [d["classes"]]
    return list(zip(ins, outs))


def param_count(d: Mapping[str, Any]) -> int:
    return sum(i * o + o for i, o in _layer_dims(d))


def flops_per_example(d: Mapping[str, Any]) -> float:
    return float(sum(2 * i * o for i, o in _layer_dims(d)))


def make_batch(d: Mapping[str, Any], batch_size: int, rng: np.random.Generator):
    return random_classification((d["in_dim"],), d["classes"], batch_size, rng)


ENTRY = ModelEntry(
    name="mlp",
    task="classify",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=make_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    description="MLP classifier (Linear+GELU stack)",
)
