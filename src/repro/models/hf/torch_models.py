"""transformers' PyTorch classes behind the native `torch_model.build(dims)` signature."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from repro.models.hf import CLASSES, transformers_for

transformers = transformers_for("torch")  # before configs.py imports it: a torch worker never imports JAX
from repro.models.hf.configs import config_for  # noqa: E402


class HFModel(nn.Module):
    """The HF model's logits for one batch (pixel values NCHW, or token ids), as ours return them."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.hf = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(x).logits


def build(entry, dims: Any) -> HFModel:
    cls = getattr(transformers, CLASSES[entry.name][0])
    return HFModel(cls(config_for(entry.name, dims)))
