from __future__ import annotations

from repro.models.common_torch import MLP
from repro.models.ffn import FFNDims


def build(dims: FFNDims) -> MLP:
    return MLP(dims.dim, dims.hidden)
