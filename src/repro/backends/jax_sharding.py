"""One Mesh and NamedShardings for batch and parameters, from `sharding.*` in the config.

Layouts (mesh axes `data` and `model`):
- dp:    batch over `data`; parameters replicated.
- fsdp:  batch over `data`; each parameter (so its gradient and optimizer state) sharded over
         `data` along its largest dimension that `data` divides.
- tp:    projections into a block (qkv, fc, up, gate) split column-wise over `model`,
         projections out of it (o, proj, down) row-wise (Megatron); the MLP's hidden layers
         alternate. Everything else replicated.
- dp_tp: dp on `data` and tp on `model`.
GSPMD inserts the collectives; any layout gives the unsharded maths (up to reduction order).
"""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from repro.backends import layouts

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")


def make_mesh(mesh: dict[str, int]) -> Mesh | None:
    """The mesh over the first devices of every process (a GPU host may have more than it uses)."""
    if not mesh:
        return None
    names, shape = tuple(mesh), tuple(mesh.values())
    per_process = layouts.mesh_size(mesh) // jax.process_count()
    devices = [d for p in range(jax.process_count())
               for d in [d for d in jax.devices() if d.process_index == p][:per_process]]
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names), devices=devices)  # classic GSPMD


def _names(path) -> list[str]:
    out = []
    for key in path:
        name = getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))
        out.append(str(name))
    return out[:-1] if out and out[-1] == "value" else out  # an nnx Variable's array


def param_spec(layout: str, mesh: Mesh, path, shape: tuple[int, ...]) -> P:
    return P(*layouts.param_spec(layout, dict(mesh.shape), _names(path), shape, None))


def shardings_for(layout: str, mesh: Mesh, tree: Any) -> Any:
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: NamedSharding(mesh, param_spec(layout, mesh, path, leaf.shape)), tree)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P("data") if "data" in mesh.axis_names else P())


def place(tree: Any, shardings: Any) -> Any:
    """Host-side values, the same in every process, as global arrays: each process places
    only its own shards (one process: plain device_put)."""
    if jax.process_count() == 1:
        return jax.device_put(tree, shardings)

    def one(leaf, sharding):
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree_util.tree_map(one, tree, shardings)


def place_batch(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global batch from this process's own rows (`make_array_from_process_local_data`)."""
    if jax.process_count() == 1:
        return jax.device_put(host, sharding)
    rows = [index[0] for index in sharding.addressable_devices_indices_map(host.shape).values()]
    start = min(r.start or 0 for r in rows)
    stop = max(host.shape[0] if r.stop is None else r.stop for r in rows)
    return jax.make_array_from_process_local_data(sharding, host[start:stop], host.shape)


def host_value(array: jax.Array) -> np.ndarray:
    """The whole value of a global array on this host (gathered across processes if needed)."""
    if array.is_fully_addressable:
        return np.asarray(array)
    if array.is_fully_replicated:
        return np.asarray(array.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def local_devices(mesh: Mesh) -> list:
    """The mesh's devices this process holds (shards elsewhere are not readable here)."""
    return [d for d in mesh.devices.flatten().tolist() if d.process_index == jax.process_index()]


def bytes_on(tree: Any, device) -> int:
    """Bytes of `tree`'s shards that live on `device`."""
    return sum(s.data.nbytes for leaf in jax.tree_util.tree_leaves(tree)
               for s in leaf.addressable_shards if s.device == device)


def total_bytes(tree: Any) -> int:
    return sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(tree))


def count_collectives(hlo_text: str) -> dict[str, int]:
    return {op: len(re.findall(rf"\s{op}(?:-start)?\(", hlo_text)) for op in COLLECTIVES}
