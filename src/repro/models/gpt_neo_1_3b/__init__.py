"""GPT-Neo (HF GPTNeo): GPT-2 with bias-free q/k/v, unscaled attention scores, and layers
alternating global (even) and local (odd, window of `window` keys) causal attention."""

from __future__ import annotations

from typing import Any, Mapping

from repro.models import gpt2_small
from repro.models.base import ModelEntry
from repro.models.common import causal_lm_batch

PRESETS = {
    "tiny": dict(vocab=128, seq=16, ctx=32, dim=32, depth=2, heads=4, window=4),
    "1_3b": dict(vocab=50257, seq=2048, ctx=2048, dim=2048, depth=24, heads=16, window=256),
}


def param_count(d: Mapping[str, Any]) -> int:
    return gpt2_small.param_count(d, qkv_bias=False)


ENTRY = ModelEntry(
    name="gpt_neo_1_3b",
    task="lm",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=causal_lm_batch,
    param_count=param_count,
    # Local layers still compute the full T x T scores (then mask), so FLOPs equal GPT-2's.
    flops_per_example=gpt2_small.flops_per_example,
    description="GPT-Neo causal LM (global/local attention alternating, unscaled scores, tied embeddings)",
)
