"""Multi-head self-attention (q, k, v, o projections, eager softmax attention) on [B, seq, dim]."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import SequenceBlock
from repro.models.common import attention_flops, attention_params


@dataclass(frozen=True)
class MHADims:
    dim: int
    heads: int
    seq: int


class MHA(SequenceBlock):
    name = "mha"
    description = "multi-head self-attention block (no mask) on [B, T, D]"
    dims_type = MHADims
    presets = {"tiny": dict(dim=32, heads=4, seq=16), "large": dict(dim=1024, heads=16, seq=512)}

    def param_count(self, d):
        return attention_params(d.dim, d.heads)

    def flops_per_example(self, d):
        return attention_flops(d.seq, d.dim, d.heads)
