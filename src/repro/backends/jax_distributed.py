"""JAX over several processes: `jax.distributed.initialize` from the run's rendezvous.

Process p of P owns mesh_size / P devices (on CPU, simulated: the worker's XLA_FLAGS); one
global Mesh spans them all. Every process computes the same host values (same seeds), and
places only its own shards: parameters through `make_array_from_callback`, each batch from
its own rows through `make_array_from_process_local_data` (jax_sharding.place_*).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import json

import jax
import numpy as np

from repro.backends.layouts import mesh_size

if TYPE_CHECKING:
    from repro.config.schema import Config
    from repro.config.workerspec import Rendezvous


def process_id(rdzv: Rendezvous, local_index: int) -> int:
    return rdzv.node_rank * rdzv.jax_processes + local_index


def init(config: Config, rdzv: Rendezvous, local_index: int) -> None:
    processes = rdzv.nodes * rdzv.jax_processes
    kwargs = {}
    if config.hardware.platform == "cpu":  # XLA's CPU client has no cross-process collectives by default
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    elif rdzv.jax_processes > 1:  # several processes per GPU host: each takes its own GPUs
        per = mesh_size(config.sharding.mesh) // processes
        kwargs["local_device_ids"] = list(range(local_index * per, (local_index + 1) * per))
    jax.distributed.initialize(rdzv.endpoint, num_processes=processes, process_id=process_id(rdzv, local_index),
                               initialization_timeout=int(rdzv.join_timeout_s), **kwargs)


def allgather_json(obj) -> list:
    """Every process's `obj` (JSON-able), in process order, on every process."""
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(obj).encode(), np.uint8)
    lengths = np.asarray(multihost_utils.process_allgather(np.array([data.size], np.int32))).ravel()
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[:data.size] = data
    rows = np.asarray(multihost_utils.process_allgather(padded))
    return [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, lengths)]
