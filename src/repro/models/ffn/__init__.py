"""Transformer feed-forward block Linear -> GELU -> Linear on [B, seq, dim] (no norm, no residual)."""

from __future__ import annotations

from typing import Any, Mapping

from repro.models.base import ModelEntry
from repro.models.common import linear_params, sequence_regression_batch

PRESETS = {
    "tiny": dict(dim=32, hidden=128, seq=16),
    "large": dict(dim=4096, hidden=16384, seq=512),  # run at batch 8
}

def param_count(d: Mapping[str, Any]) -> int:
    return linear_params(d["dim"], d["hidden"]) + linear_params(d["hidden"], d["dim"])

def flops_per_example(d: Mapping[str, Any]) -> float:
    return float(2 * 2 * d["seq"] * d["dim"] * d["hidden"])

ENTRY = ModelEntry(
    name="ffn",
    task="regress",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=sequence_regression_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    description="feed-forward block Linear -> GELU -> Linear on [B, T, D]",
    extra={"batch_size": {"tiny": 4, "large": 8}},
)
