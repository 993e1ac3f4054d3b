"""GPT-2: pre-LN causal decoder, learned positions, output head tied to the token embedding."""

from __future__ import annotations

from typing import Any, Mapping

from repro.models.base import ModelEntry
from repro.models.common import attention_flops, attention_params, causal_lm_batch, linear_params

EPS = 1e-5

PRESETS = {
    "tiny": dict(vocab=128, seq=16, ctx=32, dim=32, depth=2, heads=4),
    "small": dict(vocab=50257, seq=1024, ctx=1024, dim=768, depth=12, heads=12),
}


def param_count(d: Mapping[str, Any], qkv_bias: bool = True) -> int:
    dim = d["dim"]
    block = 4 * dim + attention_params(dim, d["heads"], qkv_bias=qkv_bias)
    block += linear_params(dim, 4 * dim) + linear_params(4 * dim, dim)
    return (d["vocab"] + d["ctx"]) * dim + d["depth"] * block + 2 * dim


def flops_per_example(d: Mapping[str, Any]) -> float:
    t, dim = d["seq"], d["dim"]
    block = attention_flops(t, dim, d["heads"]) + 2 * 2 * t * dim * 4 * dim
    return float(d["depth"] * block + 2 * t * dim * d["vocab"])


ENTRY = ModelEntry(
    name="gpt2_small",
    task="lm",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=causal_lm_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    description="GPT-2 causal LM (pre-LN, learned positions, tied embeddings, exact GELU)",
)
