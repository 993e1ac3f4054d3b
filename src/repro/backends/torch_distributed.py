"""PyTorch layouts over processes: DDP, FSDP2 (`fully_shard`), DTensor tensor parallel, FSDP+TP.

The worker hands a sharded torch run to torch's own elastic launcher (the engine behind
torchrun): one process per rank, spread over `cluster.nodes` hosts (the rendezvous comes
from repro.job.cluster), gloo on CPU and NCCL on GPU. Every rank runs the same measured
pipeline; rank 0 gathers every rank's summary and the worker on node 0 reports it. A rank
that dies ends the launch (torchelastic stops the others) and the run fails naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from repro.backends.layouts import tp_role

if TYPE_CHECKING:
    from repro.config.schema import Config
    from repro.config.workerspec import WorkerSpec


def launch(spec: WorkerSpec, rank_main, local_ranks: int) -> dict[int, dict]:
    """Run `rank_main(spec)` in `local_ranks` processes on this node; {global rank: its return value}.

    One node: c10d rendezvous on the free port the parent picked. Several: the static
    rendezvous (torchrun's --node-rank/--master-addr), node 0 hosting its TCP store, so that
    each node's ranks follow from `cluster.node_rank` and rank 0 lives on node 0.
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    rdzv = spec.rendezvous
    common = dict(nproc_per_node=local_ranks, max_restarts=0, monitor_interval=0.2, start_method="spawn",
                  rdzv_endpoint=rdzv.endpoint, min_nodes=rdzv.nodes, max_nodes=rdzv.nodes)
    if rdzv.nodes == 1:
        config = LaunchConfig(rdzv_backend="c10d", run_id=f"repro-{os.getpid()}", **common)
    else:
        config = LaunchConfig(rdzv_backend="static", run_id=f"repro-{spec.config_hash[:16]}",
                              rdzv_configs={"rank": rdzv.node_rank, "timeout": int(rdzv.join_timeout_s)},
                              **common)
    try:
        return elastic_launch(config, rank_main)(spec)
    except dist.DistStoreError as e:  # the rendezvous: a node that never came
        from repro.config.workerspec import JOIN_HINT

        raise RuntimeError(f"{e} (rendezvous at {rdzv.endpoint}, cluster.join_timeout_s="
                           f"{rdzv.join_timeout_s:g}: {JOIN_HINT})") from None
    except ChildFailedError as e:
        dead = "; ".join(f"rank {rank} exited with code {f.exitcode}" + (f" ({f.signal_name()})" if f.exitcode < 0 else "")
                         for rank, f in sorted(e.failures.items()))
        raise RuntimeError(f"a rank failed, the run was stopped: {dead}") from None


def init(config: Config) -> None:
    backend = "nccl" if torch.cuda.is_available() and config.hardware.platform == "gpu" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=min(config.run.timeout_s, 300)))


def data_rank_and_size(config: Config) -> tuple[int, int]:
    """This rank's slice of the batch: data-parallel ranks split it, tensor-parallel ones share it."""
    mesh = config.sharding.mesh
    model = mesh.get("model", 1)
    return dist.get_rank() // model, mesh.get("data", 1)


def _tp_plan(model: nn.Module) -> dict:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    hidden = getattr(model, "hidden", None)
    layers = len(hidden) if hidden is not None else None
    plan = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            role = tp_role(name.split("."), layers)
            if role:
                plan[name] = ColwiseParallel() if role == "col" else RowwiseParallel()
    return plan


def parallelize(model: nn.Module, config: dict) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    layout, axes = config.sharding.name, config.sharding.mesh
    device = "cuda" if torch.cuda.is_available() and config.hardware.platform == "gpu" else "cpu"
    if layout == "dp":
        return nn.parallel.DistributedDataParallel(model)
    if layout == "fsdp":
        mesh = init_device_mesh(device, (axes["data"],), mesh_dim_names=("data",))
        for module in list(model.modules())[1:]:
            if isinstance(module, nn.Linear):
                fully_shard(module, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    if layout == "tp":
        mesh = init_device_mesh(device, (axes["model"],), mesh_dim_names=("model",))
        return parallelize_module(model, mesh, _tp_plan(model))
    mesh = init_device_mesh(device, (axes["data"], axes["model"]), mesh_dim_names=("data", "model"))
    model = parallelize_module(model, mesh["model"], _tp_plan(model))
    return fully_shard(model, mesh=mesh["data"])


def full(t: torch.Tensor) -> torch.Tensor:
    """A parameter as one whole tensor (gathers a DTensor's shards)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def local_bytes(model: nn.Module) -> int:
    return sum((p.to_local() if hasattr(p, "to_local") else p).nbytes for p in model.parameters())


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    t = value.detach().float().clone()
    dist.all_reduce(t)  # SUM: gloo has no AVG
    return t / dist.get_world_size()
