from __future__ import annotations

import torch
from torch import nn

from repro.models.common_torch import Block
from repro.models.vit import EPS, ViTDims


class ViT(nn.Module):
    def __init__(self, d: ViTDims):
        super().__init__()
        w, p = d.width, d.patch
        tokens = (d.image // p) ** 2 + 1
        self.patch = nn.Conv2d(d.channels, w, p, stride=p)
        self.cls = nn.Parameter(torch.randn(1, 1, w) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens, w) * 0.02)
        self.blocks = nn.ModuleList(Block(w, d.heads, d.mlp, EPS) for _ in range(d.depth))
        self.ln = nn.LayerNorm(w, eps=EPS)
        self.head = nn.Linear(w, d.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [B, C, H, W]
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])


def build(dims: ViTDims) -> ViT:
    return ViT(dims)
