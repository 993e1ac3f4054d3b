from __future__ import annotations

from typing import Any, Mapping

from repro.models.gpt2_small.torch_model import GPT


def build(dims: Mapping[str, Any]) -> GPT:
    return GPT(dims, qkv_bias=False, scale=1.0, window=dims["window"])
