from __future__ import annotations

from typing import Any, Mapping

import jax.numpy as jnp
from flax import nnx

from repro.models.common_flax import MLP


def build(dims: Mapping[str, Any], rngs: nnx.Rngs, *, dtype=None, param_dtype=jnp.float32) -> MLP:
    return MLP(dims["dim"], dims["hidden"], rngs=rngs, dtype=dtype, param_dtype=param_dtype)
