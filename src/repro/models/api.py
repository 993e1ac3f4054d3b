"""The workload protocol: what repro needs of a model, whether it lives in the zoo or in your package.

Subclass `Model` in one file of your own package, name it from a Hydra yaml with `_target_`
(`repro --config-dir ./myconf model=mymodel`) or from the entry-point group `repro.models`,
and every framework, precision, verdict, report and replay works on it:

    class ResConvNet(repro.Model):               # repro.Model is repro.models.api.Model
        name = "resconv"
        task = "classify"                                    # classify | lm | regress: the default loss
        presets = {"tiny": dict(image=16, channels=3, width=16, classes=10)}
        image_input = True                                   # NHWC batches; torch gets NCHW

        def flax_module(self, dims, rngs, *, dtype=None, param_dtype=jnp.float32): ...  # an nnx.Module
        def torch_module(self, dims): ...                                                # a torch.nn.Module
        def input_shape(self, dims): return (dims["image"], dims["image"], dims["channels"])

Import the frameworks inside those two methods: a JAX run never imports torch, nor a torch run
flax. Everything else is optional:
- `make_batch(dims, batch_size, rng)` -> (x, y) NumPy: default random inputs of `input_shape`
  and labels below `dims["classes"]` (classify), tokens below `dims["vocab"]` (lm) or targets of
  `target_shape` (regress);
- `flops_per_example(dims)`: forward FLOPs of one example (a train step is taken as 3x). Absent,
  each run measures its step (JAX: XLA's cost analysis; torch: `FlopCounterMode`) and the record
  says which (`results.flops_source`);
- `param_count(dims)`: listed by `repro models` (absent: counted when the preflight builds it);
- `jax_loss(out, y)` / `torch_loss(out, y)`: a loss of your own (fp32 scalar);
- the weight converter for `run.init=shared`: `flax_state(m)` / `load_flax_state(m, state)` and
  `torch_state(m)` / `load_torch_state(m, state)` in one canonical layout of your choice
  (key -> fp32 array). The default pairs parameters by shape and kind (weight, bias, norm
  statistics) in declaration order on both sides; where that pairing cannot be proved (shapes
  that differ, repeated shapes whose outputs disagree after a copy), the preflight refuses,
  naming the tensors;
- `partitioning = {"fsdp": True, "tp": True}`: the layouts beyond data parallel it supports
  (`sharding=dp` always works; JAX shards by its generic rules, torch by FSDP2);
- `torch_xla = True`: the torch module runs under PyTorch/XLA too (its own interpreter,
  `.venv-xla`, must have your package installed); without it `framework=torch_xla` is refused.

The zoo's models subclass it too (`repro.models.base.ZooModel`): one protocol, one registry. A
zoo model's methods get its dimensions as a frozen dataclass (`dims_type`, `dims.width`); yours get
the dict of the preset's values (`Model.dims_of`: the worker hands each model its own form).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # NumPy is imported where a batch is made: a worker's first import of it is its framework's
    import numpy as np

Batch = tuple["np.ndarray", "np.ndarray"]


def token_batch(rng: np.random.Generator, batch_size: int, vocab: int, seq: int) -> Batch:
    """A language model's default batch: tokens below `vocab`, the targets shifted by one."""
    import numpy as np

    toks = rng.integers(0, vocab, size=(batch_size, seq + 1), dtype=np.int32)
    return toks[:, :-1].copy(), toks[:, 1:].copy()


# What the preflight asks of every workload: the methods it must define itself.
REQUIRED_METHODS = ("flax_module", "torch_module")
REQUIRED_ATTRIBUTES = ("name", "presets")
TASKS = ("classify", "lm", "regress")


class Model:
    """One workload: presets of dimensions, the same function as a Flax NNX and a PyTorch module."""

    name: str = ""
    task: str = "classify"
    presets: Mapping[str, Mapping[str, Any]] = {}
    default_preset: str | None = None  # None: the first preset
    image_input: bool = False
    description: str = ""
    batch_sizes: Mapping[str, int] = {}  # suggested run.batch_size per preset (else 32)
    partitioning: Mapping[str, bool] = {}  # {"fsdp": True, "tp": True}: layouts beyond dp
    torch_xla: bool = False  # True: the torch module also runs under PyTorch/XLA (installed in .venv-xla too)
    source = "package"  # set by the registry: "zoo", "entry point NAME (dist)", "_target_ X"

    # ---- required --------------------------------------------------------------------------
    def flax_module(self, dims: Mapping[str, Any], rngs, *, dtype=None, param_dtype=None):
        raise NotImplementedError(f"{type(self).__name__}.flax_module(dims, rngs, *, dtype, param_dtype) "
                                  "must return the Flax NNX module")

    def torch_module(self, dims: Mapping[str, Any]):
        raise NotImplementedError(f"{type(self).__name__}.torch_module(dims) must return the torch.nn.Module")

    # ---- batches ---------------------------------------------------------------------------
    def input_shape(self, dims: Mapping[str, Any]) -> tuple[int, ...]:
        raise NotImplementedError(f"{type(self).__name__}: define input_shape(dims) (one example's input "
                                  "shape, NHWC for images) or make_batch(dims, batch_size, rng)")

    def target_shape(self, dims: Mapping[str, Any]) -> tuple[int, ...]:
        return self.input_shape(dims)

    def make_batch(self, dims: Mapping[str, Any], batch_size: int, rng: np.random.Generator) -> Batch:
        """Synthetic default: the same NumPy numbers for every framework (from the run's seed)."""
        if self.task == "lm":
            return token_batch(rng, batch_size, dims["vocab"], dims["seq"])
        return self.shaped_batch(dims, batch_size, rng, dims["classes"] if self.task == "classify" else None)

    def shaped_batch(self, dims: Any, batch_size: int, rng: np.random.Generator, classes: int | None) -> Batch:
        """Inputs of `input_shape` and labels below `classes` (classify), or targets of `target_shape`
        (None: regress), drawn in that order."""
        import numpy as np

        x = rng.standard_normal((batch_size, *self.input_shape(dims)), dtype=np.float32)
        if classes is not None:
            return x, rng.integers(0, classes, size=(batch_size,), dtype=np.int32)
        return x, rng.standard_normal((batch_size, *self.target_shape(dims)), dtype=np.float32)

    # ---- what repro computes from it -------------------------------------------------------
    @property
    def extra(self) -> dict:
        return {"batch_size": dict(self.batch_sizes)}

    def resolve_preset(self, preset: str | None) -> str:
        if preset == "published":
            return list(self.presets)[-1]
        return preset or self.default_preset or next(iter(self.presets))

    def preset_values(self, preset: str | None = None, **overrides: Any) -> dict[str, Any]:
        """The dimensions of `preset` with `overrides` (None: the preset's), as a config records them."""
        name = self.resolve_preset(preset)
        if name not in self.presets:
            raise KeyError(f"model {self.name!r} has no preset {name!r}; valid presets: "
                           f"{', '.join(self.presets)}, published")
        return {**self.presets[name], **{k: v for k, v in overrides.items() if v is not None}}

    def dims_of(self, values: Mapping[str, Any]) -> Any:
        """The dimensions as this model's methods take them, from the values a config records: here
        the dict itself; a zoo model's frozen dataclass, its `dims_type` (`repro.models.base.ZooModel`)."""
        return values

    def dims(self, preset: str | None = None, **overrides: Any) -> Any:
        """`preset`'s dimensions (with `overrides`) as this model's methods take them (`dims_of`)."""
        return self.dims_of(self.preset_values(preset, **overrides))

    def flops_known(self) -> bool:
        return type(self).flops_per_example is not Model.flops_per_example

    def flops_per_example(self, dims: Mapping[str, Any]) -> float | None:
        return None  # measured by the run (XLA cost analysis / torch FlopCounterMode)

    def train_flops(self, dims: Any, batch_size: int) -> float | None:
        per = self.flops_per_example(dims)
        return None if per is None else 3.0 * batch_size * per

    def param_count(self, dims: Mapping[str, Any]) -> int | None:
        return None

    # ---- the builders the backends call ----------------------------------------------------
    def build_flax(self, dims, rngs, *, dtype=None, param_dtype=None):
        return self.flax_module(dims, rngs, dtype=dtype, param_dtype=param_dtype)

    def build_torch(self, dims):
        return self.torch_module(dims)

    # ---- canonical state (run.init=shared): the default converter ---------------------------
    # by_path: the twins share attribute names and the weights are exchanged by path
    # (state_flax.read/write: the zoo); else paired by shape and kind in declaration order
    by_path = False

    def _converter(self, module: str, verb: str):
        import importlib

        return getattr(importlib.import_module(f"repro.models.{module}"), verb if self.by_path else f"{verb}_ordered")

    def flax_state(self, fmodel) -> dict[str, np.ndarray]:
        return self._converter("state_flax", "read")(fmodel)

    def flax_shapes(self, fmodel) -> dict[str, tuple]:
        return self._converter("state_flax", "shapes")(fmodel)

    def load_flax_state(self, fmodel, state: Mapping[str, np.ndarray]):
        return self._converter("state_flax", "write")(fmodel, state)

    def torch_state(self, tmodel) -> dict[str, np.ndarray]:
        return self._converter("state_torch", "read")(tmodel)

    def torch_shapes(self, tmodel) -> dict[str, tuple]:
        return self._converter("state_torch", "shapes")(tmodel)

    def load_torch_state(self, tmodel, state: Mapping[str, np.ndarray]):
        return self._converter("state_torch", "write")(tmodel, state)
