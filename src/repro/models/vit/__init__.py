"""ViT image classifier, pre-LN encoder as in HuggingFace `ViTForImageClassification`."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import ZooModel
from repro.models.common import attention_flops, attention_params, linear_params

EPS = 1e-12  # HF ViTConfig.layer_norm_eps


@dataclass(frozen=True)
class ViTDims:
    image: int
    patch: int
    channels: int
    width: int
    depth: int
    heads: int
    mlp: int
    classes: int


def _tokens(d: ViTDims) -> int:
    return (d.image // d.patch) ** 2 + 1  # patches + class token


class ViT(ZooModel):
    name = "vit"
    task = "classify"
    image_input = True
    description = "ViT classifier (conv patches, cls token, pre-LN encoder, eager attention)"
    dims_type = ViTDims
    presets = {
        "tiny": dict(image=32, patch=8, channels=3, width=64, depth=2, heads=4, mlp=128, classes=10),
        # Reads the DVC-tracked digits (8×8×1, 10 classes): data=digits.
        "digits": dict(image=8, patch=2, channels=1, width=64, depth=2, heads=4, mlp=128, classes=10),
        "small": dict(image=224, patch=16, channels=3, width=384, depth=12, heads=6, mlp=1536, classes=1000),
        "b16": dict(image=224, patch=16, channels=3, width=768, depth=12, heads=12, mlp=3072, classes=1000),
    }

    def input_shape(self, d):
        return (d.image, d.image, d.channels)

    def param_count(self, d):
        w = d.width
        block = 4 * w + attention_params(w, d.heads) + linear_params(w, d.mlp) + linear_params(d.mlp, w)
        embed = linear_params(d.channels * d.patch ** 2, w) + w + _tokens(d) * w
        return embed + d.depth * block + 2 * w + linear_params(w, d.classes)

    def flops_per_example(self, d):
        w, t = d.width, _tokens(d)
        patches = 2 * (t - 1) * d.channels * d.patch ** 2 * w
        block = attention_flops(t, w, d.heads) + 2 * 2 * t * w * d.mlp
        return float(patches + d.depth * block + 2 * w * d.classes)
