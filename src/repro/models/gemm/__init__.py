"""One bias-free Linear, y = x @ W: the bare matmul workload."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import ZooModel


@dataclass(frozen=True)
class GEMMDims:
    d_in: int
    d_out: int


class GEMM(ZooModel):
    name = "gemm"
    task = "regress"
    description = "single bias-free Linear (GEMM) on [B, d_in]"
    dims_type = GEMMDims
    presets = {
        "tiny": dict(d_in=64, d_out=64),
        "large": dict(d_in=4096, d_out=4096),  # run at batch 4096: a 4096^3 GEMM
    }
    batch_sizes = {"tiny": 32, "large": 4096}

    def input_shape(self, d):
        return (d.d_in,)

    def target_shape(self, d):
        return (d.d_out,)

    def param_count(self, d):
        return d.d_in * d.d_out

    def flops_per_example(self, d):
        return float(2 * d.d_in * d.d_out)
