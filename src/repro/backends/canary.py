"""The process canary: a short fixed kernel of the run's own framework, timed in its worker.

The same work in every run of a framework, whatever the config: a float32 matmul of a fixed shape
and a sum over a fixed buffer (a read sweep: no allocation, no page fault), on the CPU, REPEATS times after one
untimed pass (its compile). The worker runs it after the build and before the measured window opens
(worker/worker.py); job/canary.py compares its median with the host's earlier canaries, so that
a process slow for its whole life is named before any step time is read (issue 48).

It leaves the run as it found it: no random number is drawn, its buffers are freed, and JAX's
persistent compile cache neither keeps its executables nor counts its look-ups (the run's
`compile_cache` counts are the model's). torch_xla reuses torch's kernel (eager torch on the CPU).

Compiling JAX's two kernels took 50-60 ms of the canary's ~95 on the 2-core reference machine (its
timed repeats ~12), in every run. They are compiled once per host, JAX and flags: the executables are
kept in repro's cache (`EXECUTABLES`, JAX's own serialisation) and loaded by later runs (~2 ms each),
the same code run on the same inputs, so the timed repeats time what they timed before. A kept one
that cannot be loaded is compiled again and replaced; a run of several JAX processes compiles its own.
The record's `executables` says which ("compiled" or "loaded").
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
import time
from typing import Callable

# the kernels below: a canary of another version is never compared with this one (2: JAX's buffers are made
# by NumPy, not jnp.ones, whose two broadcast programs compiled in every run: ~0.15 s against ~0.04 s)
VERSION = 2
MATMUL_N = 384  # a (384, 384) @ (384, 384) float32 matmul: 113 MFLOP
SWEEP_FLOATS = 1 << 23  # 32 MiB of float32, beyond a core's caches
REPEATS = 5
EXECUTABLES = "canary"  # under repro's cache root (paths.cache_root): the JAX kernels' kept executables
Kernel = Callable[[], None]


def run(backend: str) -> dict:
    """{"seconds": the median of the repeats' totals, "kernels": {"matmul_s", "sweep_s"} (each its
    own median), "repeats", "framework", "kernel": whose kernels ran, "device": "cpu", "version"}."""
    kernels = KERNELS["torch" if backend == "torch_xla" else backend]()
    with kernels as (matmul, sweep):
        matmul(), sweep()  # untimed: first touches (and a compile where one was left)
        pairs = [(_timed(matmul), _timed(sweep)) for _ in range(REPEATS)]
    return {"seconds": statistics.median(m + s for m, s in pairs),
            "kernels": {"matmul_s": statistics.median(m for m, _ in pairs),
                        "sweep_s": statistics.median(s for _, s in pairs)},
            "repeats": REPEATS, "framework": backend, "kernel": "torch" if backend == "torch_xla" else backend,
            "device": "cpu", "version": VERSION, **({"executables": kernels.executables} if kernels.executables else {})}


def _timed(kernel: Kernel) -> float:
    t0 = time.perf_counter()
    kernel()
    return time.perf_counter() - t0


class _jax:
    """JAX's kernels on its CPU device, compiled outside the persistent compile cache, or loaded as kept."""

    executables: str | None = None  # "compiled" (either kernel was) or "loaded" (both were)

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
        kept = _Kept(jax, cpu)
        mm = kept.executable("matmul", lambda a: jnp.matmul(a, a, precision="highest"), a)
        sw = kept.executable("sweep", lambda x: jnp.sum(x), x)
        self.executables = "compiled" if kept.compiled else "loaded"
        self.buffers = [a, x]
        return (lambda: mm(a).block_until_ready()), (lambda: sw(x).block_until_ready())

    def __exit__(self, *exc) -> None:
        from repro.backends import compile_cache

        self.buffers.clear()
        self.jax.config.update("jax_persistent_cache_min_compile_time_secs", self.min_s)
        compile_cache.restore(self.counts)


class _Kept:
    """The JAX kernels' executables kept in repro's cache for this host: the same JAX, XLA flags and
    CPU (its model and every feature flag XLA may target) load them; anything else compiles its own.
    JAX's serialisation is a pickle that may run code when loaded: the files are the user's own cache,
    as JAX's persistent compile cache is."""

    def __init__(self, jax, cpu) -> None:
        import jaxlib

        from repro import hardware, paths

        self.jax, self.cpu, self.compiled = jax, cpu, False
        self.folder = paths.cache_root() / EXECUTABLES
        self.key = {"version": VERSION, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                    "platform": cpu.client.platform_version, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                    "host": socket.gethostname(), "cpu": hardware.cpu_model(), "flags": hardware.cpu_flags()}
        # several processes of one run share a client whose devices a kept executable does not know
        self.keep = jax.process_count() == 1

    def executable(self, name: str, fn, arg):
        """`fn` for `arg` on this process's CPU device: loaded where kept, else compiled (and kept)."""
        from jax.experimental import serialize_executable

        path = self.folder / f"{name}-{hashlib.sha256(json.dumps([name, self.key]).encode()).hexdigest()[:20]}.bin"
        trees = self.jax.tree.structure(((arg,), {})), self.jax.tree.structure(arg)  # (args, kwargs) in, one array out
        if self.keep:
            try:
                return serialize_executable.deserialize_and_load(path.read_bytes(), *trees, backend="cpu",
                                                                 execution_devices=[self.cpu])
            except Exception:  # noqa: BLE001 - none kept, or one this JAX cannot load: compiled again
                pass
        compiled = self.jax.jit(fn).lower(arg).compile()
        self.compiled = True
        if self.keep:
            self._write(path, lambda: serialize_executable.serialize(compiled)[0])
        return compiled

    def _write(self, path, payload) -> None:
        """Whole or not at all (a temp file renamed); an executable that cannot be serialised or a cache
        that cannot be written costs the canary nothing: the next run compiles again."""
        try:
            data = payload()
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except Exception:  # noqa: BLE001 - see above
            pass


class _torch:
    """torch's kernels, eager on the CPU at full fp32 (the run's matmul precision put back on exit)."""

    executables: str | None = None  # eager: nothing is compiled

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
