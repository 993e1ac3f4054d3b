"""What a model is to repro: one spec, two implementations of the same function.

The zoo's models answer the workload protocol of `repro.models.api` (the one a model in your
own package implements as a `Model` subclass); a zoo model lives in one folder (`repro/models/<name>/`):
- `__init__.py` defines `ENTRY`, a `ModelEntry` (presets, task, batch maker, analytic sizes);
- `flax_model.py` has `build(dims: dict, rngs: nnx.Rngs) -> nnx.Module`;
- `torch_model.py` has `build(dims: dict) -> torch.nn.Module`;
- `convert.py` (optional) has `torch_to_flax(tmodel, fmodel)` and `flax_to_torch(fmodel, tmodel)`.

The framework modules are named by import path and imported only by the worker of that
framework, so a JAX run never imports torch and vice versa.

Batches are made once in NumPy from the run's seed, in the JAX layout (NHWC images); the
torch backend transposes images to NCHW when it puts them on the device, outside the timed
loop. Both frameworks therefore see the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

# Tasks decide the loss each backend applies to the model's output:
#   classify: logits [B, C] vs int labels [B]          -> softmax cross-entropy
#   lm:       logits [B, T, V] vs int tokens [B, T]    -> token cross-entropy
#   regress:  output [B, ...] vs float target [B, ...] -> mean squared error
TASKS = ("classify", "lm", "regress")

Batch = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ModelEntry:
    name: str
    task: str
    presets: Mapping[str, Mapping[str, Any]]
    default_preset: str
    make_batch: Callable[[Mapping[str, Any], int, np.random.Generator], Batch]
    param_count: Callable[[Mapping[str, Any]], int]
    # Forward FLOPs for one example (multiply-add = 2 FLOPs). A train step is taken as 3x.
    flops_per_example: Callable[[Mapping[str, Any]], float]
    image_input: bool = False  # inputs are NHWC images (torch gets NCHW)
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def flax_module(self) -> str:
        return f"repro.models.{self.name}.flax_model"

    @property
    def torch_module(self) -> str:
        return f"repro.models.{self.name}.torch_model"

    @property
    def convert_module(self) -> str:
        return f"repro.models.{self.name}.convert"

    def resolve_preset(self, preset: str | None) -> str:
        """`published` names each model's published size: by convention its last preset."""
        if preset == "published":
            return list(self.presets)[-1]
        return preset or self.default_preset

    def dims(self, preset: str | None = None, **overrides: Any) -> dict[str, Any]:
        """The preset's dimensions with explicit (non-None) overrides applied."""
        name = self.resolve_preset(preset)
        if name not in self.presets:
            raise KeyError(
                f"model {self.name!r} has no preset {name!r}; valid presets: {', '.join(self.presets)}, published"
            )
        dims = dict(self.presets[name])
        dims.update({k: v for k, v in overrides.items() if v is not None})
        return dims

    def train_flops(self, dims: Mapping[str, Any], batch_size: int) -> float:
        return 3.0 * batch_size * self.flops_per_example(dims)

    # The workload protocol (`repro.models.api`), answered from the folder's modules.
    source = "zoo"
    partitioning = {"fsdp": True, "tp": True}
    torch_xla = True

    def flops_known(self) -> bool:
        return True

    def build_flax(self, dims, rngs, *, dtype=None, param_dtype=None):
        import importlib

        kw = {} if param_dtype is None else {"param_dtype": param_dtype}
        return importlib.import_module(self.flax_module).build(dims, rngs, dtype=dtype, **kw)

    def build_torch(self, dims):
        import importlib

        return importlib.import_module(self.torch_module).build(dims)

    def flax_state(self, fmodel):
        from repro.models import state_flax

        return state_flax.read(fmodel)

    def flax_shapes(self, fmodel):
        from repro.models import state_flax

        return state_flax.shapes(fmodel)

    def load_flax_state(self, fmodel, state):
        from repro.models import state_flax

        return state_flax.write(fmodel, state)

    def torch_state(self, tmodel):
        from repro.models import state_torch

        return state_torch.read(tmodel)

    def torch_shapes(self, tmodel):
        from repro.models import state_torch

        return state_torch.shapes(tmodel)

    def load_torch_state(self, tmodel, state):
        from repro.models import state_torch

        return state_torch.write(tmodel, state)


def random_classification(
    x_shape: tuple[int, ...], classes: int, batch_size: int, rng: np.random.Generator
) -> Batch:
    """Random fp32 inputs of `x_shape` per example and int32 labels below `classes`."""
    x = rng.standard_normal((batch_size, *x_shape), dtype=np.float32)
    y = rng.integers(0, classes, size=(batch_size,), dtype=np.int32)
    return x, y
