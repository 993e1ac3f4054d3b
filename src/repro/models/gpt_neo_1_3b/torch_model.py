from __future__ import annotations

from repro.models.gpt2_small.torch_model import GPT
from repro.models.gpt_neo_1_3b import GPTNeoDims


def build(dims: GPTNeoDims) -> GPT:
    return GPT(dims, qkv_bias=False, scale=1.0, window=dims.window)
