"""Transformer feed-forward block Linear -> GELU -> Linear on [B, seq, dim] (no norm, no residual)."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import SequenceBlock
from repro.models.common import linear_params


@dataclass(frozen=True)
class FFNDims:
    dim: int
    hidden: int
    seq: int


class FFN(SequenceBlock):
    name = "ffn"
    description = "feed-forward block Linear -> GELU -> Linear on [B, T, D]"
    dims_type = FFNDims
    presets = {"tiny": dict(dim=32, hidden=128, seq=16), "large": dict(dim=4096, hidden=16384, seq=512)}
    partitioning = {"fsdp": True, "tp": True, "torch_tp": True}  # Linear pairs: column then row parallel

    def param_count(self, d):
        return linear_params(d.dim, d.hidden) + linear_params(d.hidden, d.dim)

    def flops_per_example(self, d):
        return float(2 * 2 * d.seq * d.dim * d.hidden)
