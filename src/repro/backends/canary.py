"""The process canary: a short fixed kernel of the run's own framework, timed in its worker.

The same work in every run of a framework, whatever the config: a float32 matmul of a fixed shape
and a sum over a fixed buffer (a read sweep: no allocation, no page fault), on the CPU, REPEATS times after one
untimed pass (its compile). The worker runs it after the build and before the measured window opens
(worker/worker.py); job/canary.py compares its median with the host's earlier canaries, so that
a process slow for its whole life is named before any step time is read (issue 48).

It leaves the run as it found it: no random number is drawn, its buffers are freed, and JAX's
persistent compile cache neither keeps its executables nor counts its look-ups (the run's
`compile_cache` counts are the model's). torch_xla reuses torch's kernel (eager torch on the CPU).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

# the kernels below: a canary of another version is never compared with this one (2: JAX's buffers are made
# by NumPy, not jnp.ones, whose two broadcast programs compiled in every run: ~0.15 s against ~0.04 s)
VERSION = 2
MATMUL_N = 384  # a (384, 384) @ (384, 384) float32 matmul: 113 MFLOP
SWEEP_FLOATS = 1 << 23  # 32 MiB of float32, beyond a core's caches
REPEATS = 5
Kernel = Callable[[], None]


def run(backend: str) -> dict:
    """{"seconds": the median of the repeats' totals, "kernels": {"matmul_s", "sweep_s"} (each its
    own median), "repeats", "framework", "kernel": whose kernels ran, "device": "cpu", "version"}."""
    kernels = KERNELS["torch" if backend == "torch_xla" else backend]
    with kernels() as (matmul, sweep):
        matmul(), sweep()  # untimed: compiles, first touches
        pairs = [(_timed(matmul), _timed(sweep)) for _ in range(REPEATS)]
    return {"seconds": statistics.median(m + s for m, s in pairs),
            "kernels": {"matmul_s": statistics.median(m for m, _ in pairs),
                        "sweep_s": statistics.median(s for _, s in pairs)},
            "repeats": REPEATS, "framework": backend, "kernel": "torch" if backend == "torch_xla" else backend,
            "device": "cpu", "version": VERSION}


def _timed(kernel: Kernel) -> float:
    t0 = time.perf_counter()
    kernel()
    return time.perf_counter() - t0


class _jax:
    """JAX's kernels, jitted on its CPU device, outside the persistent compile cache."""

    def __enter__(self) -> tuple[Kernel, Kernel]:
        import jax
        import jax.numpy as jnp
        import numpy as np

        from repro.backends import compile_cache

        self.jax, self.counts = jax, compile_cache.snapshot()
        # The cache's use is fixed at a process's first compile (the build's): executables that
        # compile faster than this are not written, and the look-ups' counts are put back on exit
        self.min_s = jax.config.jax_persistent_cache_min_compile_time_secs
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf"))
        cpu = jax.local_devices(backend="cpu")[0]  # this process's own, in a run of several too
        # the inputs made by NumPy and placed: jnp.ones would compile a broadcast per shape (~0.1 s a run)
        a = jax.device_put(np.ones((MATMUL_N, MATMUL_N), np.float32), cpu)
        x = jax.device_put(np.ones((SWEEP_FLOATS,), np.float32), cpu)
        mm = jax.jit(lambda a: jnp.matmul(a, a, precision="highest"))
        sw = jax.jit(lambda x: jnp.sum(x))
        self.buffers = [a, x]
        return (lambda: mm(a).block_until_ready()), (lambda: sw(x).block_until_ready())

    def __exit__(self, *exc) -> None:
        from repro.backends import compile_cache

        self.buffers.clear()
        self.jax.config.update("jax_persistent_cache_min_compile_time_secs", self.min_s)
        compile_cache.restore(self.counts)


class _torch:
    """torch's kernels, eager on the CPU at full fp32 (the run's matmul precision put back on exit)."""

    def __enter__(self) -> tuple[Kernel, Kernel]:
        import torch

        self.torch, self.precision = torch, torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        a = torch.ones(MATMUL_N, MATMUL_N, dtype=torch.float32)
        x = torch.ones(SWEEP_FLOATS, dtype=torch.float32)
        self.buffers = [a, x]
        return (lambda: torch.matmul(a, a)), (lambda: torch.sum(x))

    def __exit__(self, *exc) -> None:
        self.buffers.clear()
        self.torch.set_float32_matmul_precision(self.precision)


KERNELS = {"jax": _jax, "torch": _torch}
