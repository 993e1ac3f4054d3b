"""PyTorch twins of `common_flax.py`: same maths, same attribute names (see common_convert.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def embed(num: int, dim: int) -> nn.Embedding:
    e = nn.Embedding(num, dim)
    nn.init.normal_(e.weight, std=0.02)
    return e


def first_rows(e: nn.Embedding, n: int) -> torch.Tensor:
    """`e(torch.arange(n))` as a slice, as common_flax.first_rows (its gradient is no index_add)."""
    return e.weight[:n]


def gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)  # exact erf form


def causal_mask(t: int, device: torch.device, window: int | None = None) -> torch.Tensor:
    """[t, t] bool, True where query i may attend key j: j <= i (and i - j < window if local)."""
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    keep = j <= i
    if window is not None:
        keep &= (i - j) < window
    return keep


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              scale: float = 1.0) -> torch.Tensor:
    """Eager attention softmax(q k^T * scale) v; see common_flax.attention (no fused SDPA)."""
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    s = q @ k.transpose(-2, -1)
    if scale != 1.0:
        s = s * scale
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    p = torch.softmax(s.float(), dim=-1).to(v.dtype)
    return p @ v


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, *, kv_heads: int | None = None, qkv_bias: bool = True,
                 out_bias: bool = True, scale: float | None = None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads or heads, dim // heads
        self.scale = self.head_dim**-0.5 if scale is None else scale
        self.qkv = nn.Linear(dim, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=qkv_bias)  # q | k | v
        self.o = nn.Linear(self.heads * self.head_dim, dim, bias=out_bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                rope: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        b, t, _ = x.shape

        def split(y, n):
            return y.view(b, t, n, self.head_dim).transpose(1, 2)

        q, k, v = self.qkv(x).split([self.heads * self.head_dim, *[self.kv_heads * self.head_dim] * 2], dim=-1)
        q, k, v = split(q, self.heads), split(k, self.kv_heads), split(v, self.kv_heads)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        y = attention(q, k, v, mask, self.scale)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, eps: float, *, qkv_bias: bool = True,
                 scale: float | None = None):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads, qkv_bias=qkv_bias, scale=scale)
        self.ln2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = MLP(dim, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))
