"""GPT-Neo (HF GPTNeo): GPT-2 with bias-free q/k/v, unscaled attention scores, and layers
alternating global (even) and local (odd, window of `window` keys) causal attention."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.gpt2_small import GPT2, GPT2Dims


@dataclass(frozen=True)
class GPTNeoDims(GPT2Dims):
    window: int


class GPTNeo(GPT2):
    # Local layers still compute the full T x T scores (then mask), so FLOPs equal GPT-2's.
    name = "gpt_neo_1_3b"
    description = "GPT-Neo causal LM (global/local attention alternating, unscaled scores, tied embeddings)"
    dims_type = GPTNeoDims
    presets = {
        "tiny": dict(vocab=128, seq=16, ctx=32, dim=32, depth=2, heads=4, window=4),
        "1_3b": dict(vocab=50257, seq=2048, ctx=2048, dim=2048, depth=24, heads=16, window=256),
    }
    qkv_bias = False
