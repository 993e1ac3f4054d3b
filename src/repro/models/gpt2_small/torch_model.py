from __future__ import annotations

import torch
from torch import nn

from repro.models.common_torch import Block, causal_mask, embed, first_rows
from repro.models.gpt2_small import EPS, GPT2Dims


class GPT(nn.Module):
    """GPT-2; with `qkv_bias=False, scale=1.0, window=w` it is GPT-Neo (odd layers local)."""

    def __init__(self, d: GPT2Dims, *, qkv_bias: bool = True, scale: float | None = None,
                 window: int | None = None):
        super().__init__()
        dim = d.dim
        self.window = window
        self.wte = embed(d.vocab, dim)
        self.wpe = embed(d.ctx, dim)
        self.blocks = nn.ModuleList(Block(dim, d.heads, 4 * dim, EPS, qkv_bias=qkv_bias, scale=scale)
                                    for _ in range(d.depth))
        self.ln_f = nn.LayerNorm(dim, eps=EPS)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.wte(tokens) + first_rows(self.wpe, t)
        causal = causal_mask(t, tokens.device)
        local = causal_mask(t, tokens.device, self.window) if self.window else causal
        for i, block in enumerate(self.blocks):
            x = block(x, local if i % 2 else causal)
        return self.ln_f(x) @ self.wte.weight.T


def build(dims: GPT2Dims) -> GPT:
    return GPT(dims)
