"""Weight copying between a Flax NNX model and its PyTorch twin, through the canonical layout.

`state_flax` maps flax variable paths to torch state_dict keys and layouts (the table is
there); `state_torch` reads and writes a torch model's state. A copy is one read and one
write: every write checks that each side is covered exactly once and that shapes agree, so a
model whose twins drifted apart fails loudly instead of copying half its weights.
"""

from __future__ import annotations

import torch
from flax import nnx

from repro.models import state_flax, state_torch
from repro.models.state_flax import Pair, pairs, to_flax_layout, to_torch_layout, variable


def torch_to_flax(tmodel: torch.nn.Module, fmodel: nnx.Module, mapping: list[Pair] | None = None):
    """Copy every torch parameter/buffer into the flax model (in place); returns fmodel."""
    return state_flax.write(fmodel, state_torch.read(tmodel), mapping)


def flax_to_torch(fmodel: nnx.Module, tmodel: torch.nn.Module, mapping: list[Pair] | None = None):
    """Copy every flax Param/BatchStat into the torch model (in place); returns tmodel."""
    return state_torch.write(tmodel, state_flax.read(fmodel, mapping))


__all__ = ["Pair", "pairs", "to_torch_layout", "to_flax_layout", "variable", "torch_to_flax", "flax_to_torch"]
