"""Multi-head self-attention (q, k, v, o projections, eager softmax attention) on [B, seq, dim]."""

from __future__ import annotations

from typing import Any, Mapping

from repro.models.base import ModelEntry
from repro.models.common import attention_flops, attention_params, sequence_regression_batch

PRESETS = {
    "tiny": dict(dim=32, heads=4, seq=16),
    "large": dict(dim=1024, heads=16, seq=512),  # run at batch 8
}

def param_count(d: Mapping[str, Any]) -> int:
    return attention_params(d["dim"], d["heads"])

def flops_per_example(d: Mapping[str, Any]) -> float:
    return attention_flops(d["seq"], d["dim"], d["heads"])

ENTRY = ModelEntry(
    name="mha",
    task="regress",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=sequence_regression_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    description="multi-head self-attention block (no mask) on [B, T, D]",
    extra={"batch_size": {"tiny": 4, "large": 8}},
)
