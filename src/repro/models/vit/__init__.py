"""ViT image classifier, pre-LN encoder as in HuggingFace `ViTForImageClassification`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from repro.models.base import ModelEntry, random_classification
from repro.models.common import attention_flops, attention_params, linear_params

EPS = 1e-12  # HF ViTConfig.layer_norm_eps

PRESETS = {
    "tiny": dict(image=32, patch=8, channels=3, width=64, depth=2, heads=4, mlp=128, classes=10),
    # Reads the DVC-tracked digits (8×8×1, 10 classes): data=digits.
    "digits": dict(image=8, patch=2, channels=1, width=64, depth=2, heads=4, mlp=128, classes=10),
    "small": dict(image=224, patch=16, channels=3, width=384, depth=12, heads=6, mlp=1536, classes=1000),
    "b16": dict(image=224, patch=16, channels=3, width=768, depth=12, heads=12, mlp=3072, classes=1000),
}


def _tokens(d: Mapping[str, Any]) -> int:
    return (d["image"] // d["patch"]) ** 2 + 1  # patches + class token


def param_count(d: Mapping[str, Any]) -> int:
    w = d["width"]
    block = 4 * w + attention_params(w, d["heads"]) + linear_params(w, d["mlp"]) + linear_params(d["mlp"], w)
    embed = linear_params(d["channels"] * d["patch"] ** 2, w) + w + _tokens(d) * w
    return embed + d["depth"] * block + 2 * w + linear_params(w, d["classes"])


def flops_per_example(d: Mapping[str, Any]) -> float:
    w, t = d["width"], _tokens(d)
    patches = 2 * (t - 1) * d["channels"] * d["patch"] ** 2 * w
    block = attention_flops(t, w, d["heads"]) + 2 * 2 * t * w * d["mlp"]
    return float(patches + d["depth"] * block + 2 * w * d["classes"])


def make_batch(d: Mapping[str, Any], batch_size: int, rng: np.random.Generator):
    return random_classification((d["image"], d["image"], d["channels"]), d["classes"], batch_size, rng)


ENTRY = ModelEntry(
    name="vit",
    task="classify",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=make_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    image_input=True,
    description="ViT classifier (conv patches, cls token, pre-LN encoder, eager attention)",
)
