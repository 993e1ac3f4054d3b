"""One bias-free Linear, y = x @ W: the bare matmul workload."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from repro.models.base import ModelEntry
from repro.models.common import regression_batch

PRESETS = {
    "tiny": dict(d_in=64, d_out=64),
    "large": dict(d_in=4096, d_out=4096),  # run at batch 4096: a 4096^3 GEMM
}


def param_count(d: Mapping[str, Any]) -> int:
    return d["d_in"] * d["d_out"]


def flops_per_example(d: Mapping[str, Any]) -> float:
    return float(2 * d["d_in"] * d["d_out"])


def make_batch(d: Mapping[str, Any], batch_size: int, rng: np.random.Generator):
    return regression_batch((d["d_in"],), (d["d_out"],), batch_size, rng)


ENTRY = ModelEntry(
    name="gemm",
    task="regress",
    presets=PRESETS,
    default_preset="tiny",
    make_batch=make_batch,
    param_count=param_count,
    flops_per_example=flops_per_example,
    description="single bias-free Linear (GEMM) on [B, d_in]",
    extra={"batch_size": {"tiny": 32, "large": 4096}},
)
