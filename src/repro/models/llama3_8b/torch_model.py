from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from repro.models.common import rope_tables
from repro.models.common_torch import Attention, causal_mask, embed
from repro.models.llama3_8b import EPS, LlamaDims


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, d: LlamaDims):
        super().__init__()
        self.attn_norm = nn.RMSNorm(d.dim, eps=EPS)
        self.attn = Attention(d.dim, d.heads, kv_heads=d.kv_heads, qkv_bias=False, out_bias=False)
        self.mlp_norm = nn.RMSNorm(d.dim, eps=EPS)
        self.mlp = SwiGLU(d.dim, d.hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, rope) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), mask, rope)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, d: LlamaDims):
        super().__init__()
        self.embed = embed(d.vocab, d.dim)
        self.blocks = nn.ModuleList(Block(d) for _ in range(d.depth))
        self.norm = nn.RMSNorm(d.dim, eps=EPS)
        self.lm_head = nn.Linear(d.dim, d.vocab, bias=False)
        # RoPE tables for `seq` positions; not in the state_dict (they are not weights).
        cos, sin = rope_tables(d.seq, d.dim // d.heads, float(d.theta))
        self.register_buffer("rope_cos", torch.tensor(cos), persistent=False)
        self.register_buffer("rope_sin", torch.tensor(sin), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        rope = self.rope_cos[:t], self.rope_sin[:t]
        mask = causal_mask(t, tokens.device)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, mask, rope)
        return self.lm_head(self.norm(x))


def build(dims: LlamaDims) -> Llama:
    return Llama(dims)
