"""PyTorch/XLA SPMD: the same layouts as JAX, as sharding annotations on one XLA graph.

`xr.use_spmd()` turns the process into one virtual device over every real one (on the CPU,
`CPU_NUM_DEVICES` simulated devices, set by the worker's environment); `xs.mark_sharding`
annotates each parameter and each batch over a `xs.Mesh` with the config's axes (`data`,
`model`), and XLA's GSPMD partitioner splits the step, as it does for JAX. The rules are
those of the other backends (repro.backends.layouts): FSDP shards each tensor along its
largest divisible dimension, TP splits a Linear column-wise into a block and row-wise out
of it (`layouts.param_spec`, the same function JAX's layouts use). torch_xla is imported
inside the functions that use it: the spec rules are plain Python, importable (and
unit-tested) where torch_xla is not installed.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from repro.backends.layouts import mesh_size, param_spec


def enable() -> None:
    """Before any XLA tensor exists: afterwards the runtime refuses to switch."""
    import torch_xla.runtime as xr

    xr.use_spmd()


def make_mesh(mesh: dict[str, int]):
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    size = mesh_size(mesh)
    found = xr.global_runtime_device_count()
    if found < size:
        raise RuntimeError(f"sharding.mesh {mesh} needs {size} XLA devices, the runtime has {found} "
                           "(on the CPU the worker sets CPU_NUM_DEVICES from the mesh)")
    return xs.Mesh(np.arange(size), tuple(mesh.values()), tuple(mesh))


def mark_parameters(model: nn.Module, mesh, layout: str, mesh_cfg: dict[str, int]) -> None:
    import torch_xla.distributed.spmd as xs

    hidden = getattr(model, "hidden", None)
    layers = len(hidden) if hidden is not None else None
    for name, p in model.named_parameters():
        spec = param_spec(layout, mesh_cfg, name.split("."), tuple(p.shape), layers)
        if any(axis is not None for axis in spec):
            xs.mark_sharding(p, mesh, spec)


def mark_batch(t: torch.Tensor, mesh, mesh_cfg: dict[str, int]) -> None:
    """Rows split over `data` (tensor-parallel-only layouts keep the batch whole)."""
    import torch_xla.distributed.spmd as xs

    if "data" in mesh_cfg and t.dim() > 0:
        xs.mark_sharding(t, mesh, ("data",) + (None,) * (t.dim() - 1))


def bytes_per_device(tensors: list[torch.Tensor]) -> dict[str, int]:
    """{device: bytes of `tensors`' shards it holds}, read from the runtime's local shards."""
    import torch_xla

    out: dict[str, int] = {}
    for t in tensors:
        shards = torch_xla._XLAC._get_local_shards([t])[0]
        for shard, device in shards:
            out[device] = out.get(device, 0) + shard.numel() * shard.element_size()
    return out
