"""transformers' PyTorch classes behind the native `torch_model.build(dims)` signature."""

from __future__ import annotations

import os
from typing import Any, Mapping

os.environ.setdefault("USE_FLAX", "0")  # a torch worker never imports JAX (transformers would)
os.environ.setdefault("USE_TF", "0")

import torch  # noqa: E402
import transformers  # noqa: E402
from torch import nn  # noqa: E402

from repro.models.hf import CLASSES  # noqa: E402
from repro.models.hf.configs import config_for  # noqa: E402


class HFModel(nn.Module):
    """The HF model's logits for one batch (pixel values NCHW, or token ids), as ours return them."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.hf = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(x).logits


def build(entry, dims: Mapping[str, Any]) -> HFModel:
    cls = getattr(transformers, CLASSES[entry.name][0])
    return HFModel(cls(config_for(entry.name, dims)))
