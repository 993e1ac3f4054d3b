from __future__ import annotations

import torch
from torch import nn

from repro.models.mlp import MLPDims


class MLP(nn.Module):
    def __init__(self, in_dim: int, width: int, depth: int, classes: int):
        super().__init__()
        dims = [in_dim] + [width] * depth
        self.hidden = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:]))
        self.head = nn.Linear(dims[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = nn.functional.gelu(layer(x))
        return self.head(x)


def build(dims: MLPDims) -> MLP:
    return MLP(dims.in_dim, dims.width, dims.depth, dims.classes)
