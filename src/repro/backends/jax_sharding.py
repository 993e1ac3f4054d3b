"""One Mesh and NamedShardings for batch and parameters, from `sharding.*` in the config.

Layouts (mesh axes `data` and `model`):
- dp:    batch over `data`; parameters replicated.
- fsdp:  batch over `data`; each parameter (so its gradient and optimizer state) sharded over
         `data` along its largest dimension that `data` divides.
- tp:    projections into a block (q, k, v, fc, up, gate) split column-wise over `model`,
         projections out of it (o, proj, down) row-wise (Megatron); the MLP's hidden layers
         alternate. Everything else replicated.
- dp_tp: dp on `data` and tp on `model`.
GSPMD inserts the collectives; any layout gives the unsharded maths (up to reduction order).
"""

from __future__ import annotations

import re
from typing import Any

import jax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from repro.backends.layouts import tp_role

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")


def make_mesh(mesh: dict[str, int]) -> Mesh | None:
    if not mesh:
        return None
    names, shape = tuple(mesh), tuple(mesh.values())
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names))  # classic GSPMD


def _names(path) -> list[str]:
    out = []
    for key in path:
        name = getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))
        out.append(str(name))
    return out[:-1] if out and out[-1] == "value" else out  # an nnx Variable's array


def _tp_spec(names: list[str], ndim: int) -> P:
    """Column- or row-wise split of a Linear's kernel [in, out] (and its bias) over `model`."""
    if len(names) < 2 or names[-1] not in ("kernel", "bias"):
        return P()
    role = tp_role(names[:-1])
    if role is None:
        return P()
    col = role == "col"
    if names[-1] == "bias":
        return P("model") if col else P()
    return P(None, "model") if col else P("model", None) if ndim == 2 else P()


def _fsdp_spec(shape: tuple[int, ...], size: int) -> P:
    dims = sorted(range(len(shape)), key=lambda d: -shape[d])
    for d in dims:
        if shape[d] % size == 0 and shape[d] >= size:
            return P(*[("data" if i == d else None) for i in range(len(shape))])
    return P()


def param_spec(layout: str, mesh: Mesh, path, shape: tuple[int, ...]) -> P:
    names = _names(path)
    if layout == "fsdp":
        return _fsdp_spec(shape, mesh.shape["data"])
    if layout in ("tp", "dp_tp"):
        spec = _tp_spec(names, len(shape))
        # a dimension the model axis does not divide stays whole
        for dim, axis in zip(shape, tuple(spec) + (None,) * len(shape)):
            if axis == "model" and dim % mesh.shape["model"]:
                return P()
        return spec
    return P()


def shardings_for(layout: str, mesh: Mesh, tree: Any) -> Any:
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: NamedSharding(mesh, param_spec(layout, mesh, path, leaf.shape)), tree)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P("data") if "data" in mesh.axis_names else P())


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def bytes_on(tree: Any, device) -> int:
    """Bytes of `tree`'s shards that live on `device`."""
    return sum(s.data.nbytes for leaf in jax.tree_util.tree_leaves(tree)
               for s in leaf.addressable_shards if s.device == device)


def total_bytes(tree: Any) -> int:
    return sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(tree))


def count_collectives(hlo_text: str) -> dict[str, int]:
    return {op: len(re.findall(rf"\s{op}(?:-start)?\(", hlo_text)) for op in COLLECTIVES}
