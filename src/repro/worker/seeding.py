"""One root seed → the seed of every RNG, and the process settings that fix the numbers.

Everything that must be set before a framework is imported (hash seed, thread variables,
cuBLAS workspace) goes into the worker's environment; the rest is applied in the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import hashlib
import os

from repro.backends import capabilities, determinism
from repro.backends.layouts import mesh_size

if TYPE_CHECKING:
    from repro.config.schema import Config

SEED_NAMES = ("python", "numpy", "torch", "jax", "data")


def derive(root: int) -> dict[str, int]:
    """Independent 31-bit seeds, one per consumer, all from the root seed."""
    return {
        name: int.from_bytes(hashlib.sha256(f"repro:{root}:{name}".encode()).digest()[:4], "big") >> 1
        for name in SEED_NAMES
    }


def resolve_threads(configured: int | None) -> int:
    """`run.threads`, or one per core the worker runs on (worker/pinning.py)."""
    from repro.worker import pinning

    return configured or len(pinning.worker_cpus())


def worker_env(config: Config, processes: int = 1) -> dict[str, str]:
    """Variables the worker must start with (before any framework import); `processes`: how
    many processes the run spans over every node (each JAX one owns its share of the mesh)."""
    run = config.run
    threads = str(resolve_threads(run.threads))
    env = {
        "PYTHONHASHSEED": str(derive(run.seed)["python"]),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "REPRO_THREADS": threads,
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    if run.deterministic:
        env["CUBLAS_WORKSPACE_CONFIG"] = determinism.CUBLAS_WORKSPACE
    caps = capabilities.of(config.framework.backend)
    platform, extra = config.hardware.platform, []
    if platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        devices = mesh_size(config.sharding.mesh) // processes
        if devices > 1 and caps.cpu_devices == capabilities.XLA_FLAGS:  # simulated devices for the mesh
            extra.append(f"--xla_force_host_platform_device_count={devices}")
        if devices > 1 and caps.cpu_devices == capabilities.CPU_NUM_DEVICES:  # PJRT's CPU client, SPMD
            env["CPU_NUM_DEVICES"] = str(devices)
    if caps.xla:  # the user's XLA_FLAGS, merged with what the run needs (deterministic ops on a GPU)
        user = os.environ.get("XLA_FLAGS", "")
        if (flags := determinism.xla_flags(run.deterministic, platform, user, extra)) != user:
            env["XLA_FLAGS"] = flags
    return env


def seed_python_numpy(seeds: dict[str, int]) -> None:
    import random

    import numpy as np

    random.seed(seeds["python"])
    np.random.seed(seeds["numpy"] % 2**32)
