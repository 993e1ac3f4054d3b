from __future__ import annotations

from repro.models.common_torch import Attention
from repro.models.mha import MHADims


def build(dims: MHADims) -> Attention:
    return Attention(dims.dim, dims.heads)
