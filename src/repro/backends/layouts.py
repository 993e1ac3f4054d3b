"""Framework-free facts about parallel layouts, shared by the JAX and torch backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from repro.backends import capabilities

if TYPE_CHECKING:
    from repro.config.schema import Config

# Tensor parallel (Megatron): projections into a block are split column-wise, projections
# out of it row-wise; the MLP's numbered hidden layers pair up the same way.
INTO_BLOCK = {"q", "k", "v", "qkv", "fc", "fc1", "up", "gate", "query", "key", "value"}
OUT_OF_BLOCK = {"o", "proj", "fc2", "down", "out", "out_proj"}


def mesh_size(mesh: dict[str, int]) -> int:
    """Devices (JAX) or processes (torch) a mesh spans: the product of its axis sizes."""
    size = 1
    for n in mesh.values():
        size *= n
    return size


def process_count(config: Config, nodes: int, jax_processes: int) -> int:
    """Processes one run spans over all nodes, by its backend's `processes` capability: one per rank
    of the mesh (torch), `jax_processes` per node (JAX), or one (PyTorch/XLA's SPMD; any unsharded run)."""
    if config.sharding.name == "none":
        return 1
    processes = capabilities.of(config.framework.backend).processes
    if processes == capabilities.PER_RANK:
        return mesh_size(config.sharding.mesh)
    if processes == capabilities.PER_NODE:
        return nodes * jax_processes
    return 1


def fsdp_dim(shape: tuple[int, ...], size: int) -> int | None:
    """The dimension FSDP shards a tensor along: its largest one that `size` divides (None: kept whole)."""
    for d in sorted(range(len(shape)), key=lambda d: -shape[d]):
        if shape[d] % size == 0 and shape[d] >= size:
            return d
    return None


def tp_role(names: list[str], hidden_layers: int | None = None) -> str | None:
    """'col', 'row' or None for the Linear whose module path is `names` (weight/bias stripped).

    `hidden_layers`: the number of layers in an MLP's `hidden` list; an unpaired last layer
    stays whole so that every column split is closed by a row split.
    """
    if not names:
        return None
    module = names[-1]
    if module.isdigit() and len(names) >= 2 and names[-2] == "hidden":
        index = int(module)
        if hidden_layers is not None and index == hidden_layers - 1 and hidden_layers % 2:
            return None
        return "col" if index % 2 == 0 else "row"
    if module in INTO_BLOCK:
        return "col"
    if module in OUT_OF_BLOCK:
        return "row"
    return None


def param_spec(layout: str, mesh: dict[str, int], names: list[str], shape: tuple[int, ...],
               hidden_layers: int | None) -> tuple:
    """The partition spec (a tuple of mesh axis names or None, one per dimension) of the
    parameter at module path `names` (ending in weight/bias). Linear weights are [out, in] in
    every backend (torch's layout; the Flax models store theirs so too, see common_flax.Linear)."""
    replicated = (None,) * len(shape)
    if layout == "fsdp":
        d = fsdp_dim(shape, mesh["data"])
        return replicated if d is None else tuple("data" if i == d else None for i in range(len(shape)))
    if layout not in ("tp", "dp_tp") or len(names) < 2 or names[-1] not in ("weight", "bias"):
        return replicated
    role = tp_role(names[:-1], hidden_layers)
    if role is None:
        return replicated
    if names[-1] == "bias":
        spec = ("model",) if role == "col" else (None,)
    elif len(shape) == 2:
        spec = ("model", None) if role == "col" else (None, "model")  # weight [out, in]
    else:
        return replicated
    # a dimension the model axis does not divide stays whole
    if any(axis == "model" and dim % mesh["model"] for dim, axis in zip(shape, spec)):
        return replicated
    return spec
