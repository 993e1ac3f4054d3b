"""Framework-free facts about parallel layouts, shared by the JAX and torch backends."""

from __future__ import annotations

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


def process_count(config: dict, nodes: int, jax_processes: int) -> int:
    """Processes one run spans over all nodes: torch one per rank of the mesh, JAX `jax_processes`
    per node; an unsharded run, or any other backend, one (PyTorch/XLA's SPMD is one process)."""
    if config["sharding"]["name"] == "none":
        return 1
    if config["framework"]["backend"] == "torch":
        return mesh_size(config["sharding"]["mesh"])
    if config["framework"]["backend"] == "jax":
        return nodes * jax_processes
    return 1


def fsdp_dim(shape: tuple[int, ...], size: int) -> int | None:
    """The dimension FSDP shards a tensor along: its largest one that `size` divides (None: kept whole)."""
    for d in sorted(range(len(shape)), key=lambda d: -shape[d]):
        if shape[d] % size == 0 and shape[d] >= size:
            return d
    return None


def tp_role(names: list[str], hidden_layers: int | None = None) -> str | None:
    """'col', 'row' or None for the Linear whose module path is `names` (kernel/bias stripped).

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
