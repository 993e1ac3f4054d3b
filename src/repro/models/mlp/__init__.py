"""A plain MLP classifier: Linear → GELU repeated `depth` times, then a Linear head."""

from __future__ import annotations

from dataclasses import dataclass

from repro.models.base import ZooModel


@dataclass(frozen=True)
class MLPDims:
    in_dim: int
    width: int
    depth: int
    classes: int


def _layer_dims(d: MLPDims) -> list[tuple[int, int]]:
    ins = [d.in_dim] + [d.width] * d.depth
    outs = [d.width] * d.depth + [d.classes]
    return list(zip(ins, outs))


class MLP(ZooModel):
    name = "mlp"
    task = "classify"
    description = "MLP classifier (Linear+GELU stack)"
    dims_type = MLPDims
    presets = {
        "tiny": dict(in_dim=64, width=128, depth=2, classes=10),
        "digits": dict(in_dim=64, width=128, depth=2, classes=10),  # data=digits: 8×8 flattened
        "small": dict(in_dim=784, width=512, depth=3, classes=10),
        "base": dict(in_dim=1024, width=2048, depth=4, classes=1000),
    }
    partitioning = {"fsdp": True, "tp": True, "torch_tp": True}  # Linear pairs: column then row parallel

    def input_shape(self, d):
        return (d.in_dim,)

    def param_count(self, d):
        return sum(i * o + o for i, o in _layer_dims(d))

    def flops_per_example(self, d):
        return float(sum(2 * i * o for i, o in _layer_dims(d)))
