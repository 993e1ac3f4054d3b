"""What a run's compile cache gave it: hits and misses, counted by each framework's own counters.

`run.compile_cache` (config/schema.py):
- cold: a fresh cache per run: every compile is measured from nothing;
- warm: one cache shared by every run of the framework on this machine (its state unknown);
- repeats: a config's first run in a sweep compiles cold into a cache of its own, and its later
  repeats reuse it (job/job.py `cache_dir`): the steady steps measure the same executables,
  the compiles that are not measured are skipped. The record says which its run was
  (`compile_cache.state`), and the first-step column reads cold runs only.

Counted here: JAX's persistent cache (its monitoring events, `/jax/compilation_cache/cache_hits`
and `cache_misses`); inductor's FX-graph cache and AOTAutograd's cache (torch._dynamo's counters).
Eager torch compiles nothing: it has nothing to reuse.
"""

from __future__ import annotations

from collections import Counter

MODES = ("cold", "warm", "repeats")
JAX_EVENTS = {"/jax/compilation_cache/cache_hits": "hits", "/jax/compilation_cache/cache_misses": "misses"}
_jax_counts: Counter = Counter()


def listen_jax() -> None:
    """Count JAX's persistent-cache hits and misses from now on (the worker calls it once)."""
    from jax._src import monitoring  # the listener API has no public name; jax's own tests use it

    def on_event(event: str, **_) -> None:
        if event in JAX_EVENTS:
            _jax_counts[JAX_EVENTS[event]] += 1

    monitoring.register_event_listener(on_event)


def start(backend: str, cache_dir: str) -> str:
    """The cache's state as this run starts ("cold": empty; "warm": something compiled before is
    there), and JAX's counting begun: called by the worker before anything compiles."""
    import os

    if backend == "jax":
        listen_jax()
    return "warm" if os.path.isdir(cache_dir) and any(os.scandir(cache_dir)) else "cold"


def counts(backend: str) -> dict[str, int]:
    """This run's hits and misses in its framework's caches ({} for a framework not counted here)."""
    if backend == "jax":
        return {"hits": _jax_counts["hits"], "misses": _jax_counts["misses"]}
    if backend == "torch":
        return torch_counts()
    return {}


def snapshot() -> Counter:
    """JAX's counts now, to be put back (`restore`) after work that is not the run's (backends/canary.py)."""
    return _jax_counts.copy()


def restore(counts: Counter) -> None:
    _jax_counts.clear()
    _jax_counts.update(counts)


def torch_counts() -> dict[str, int]:
    """Inductor's FX-graph cache and AOTAutograd's cache, hits and misses (0 where nothing compiled:
    a run that never imported dynamo compiled nothing, and importing it to ask costs an eager run ~1.4 s)."""
    import sys

    if "torch._dynamo.utils" not in sys.modules:
        return dict.fromkeys(("fxgraph_hits", "fxgraph_misses", "aot_autograd_hits", "aot_autograd_misses"), 0)
    from torch._dynamo.utils import counters

    return {"fxgraph_hits": counters["inductor"]["fxgraph_cache_hit"],
            "fxgraph_misses": counters["inductor"]["fxgraph_cache_miss"],
            "aot_autograd_hits": counters["aot_autograd"]["autograd_cache_hit"],
            "aot_autograd_misses": counters["aot_autograd"]["autograd_cache_miss"]}


def nothing_to_reuse(backend: str, compiled: bool) -> str | None:
    """Why a run of this framework has no compile to reuse, or None."""
    if backend == "torch" and not compiled:
        return "eager PyTorch compiles nothing: its repeats are the same cold or warm"
    return None
