"""A few steps under the framework's own profiler, after the timed loop.

Each backend's `profile(steps, out_dir)` calls one of these with its own step (step + sync).
Every step is wrapped in a `repro_step_<i>` annotation, so that the reduction
(repro.profile.reduce) finds the step windows in the trace. As many unprofiled steps, timed
like the timed loop's, run just before: profiled over unprofiled is the profiler's overhead,
measured now, on the machine as it is now. One more step runs under the profiler's warm-up
(torch) so that the profiler's own start-up is not in a profiled step.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

STEPS = 5  # profiled steps (after one warm-up step); the median one is reported


@dataclass(frozen=True)
class Captured:
    """What a backend's `profile(first, steps, out_dir)` gives back: the profiler, the files to keep,
    the trace to reduce (None: the profiler gives its counters only) and its op vocabulary's family."""

    profiler: str
    files: list[str]
    viewer: str
    family: str | None = None  # "torch" or "xla" (repro.profile.reduce); None without a trace
    trace: str | None = None
    unprofiled_ms: float | None = None  # as many steps just before, without the profiler
    hlo: str | None = None  # the compiled module's HLO text (JAX): what each fusion holds
    step_ms_each: list[float] | None = None  # counters only: each profiled step's wall
    executions_per_step: float | None = None  # counters only (torch_xla)
    compiles_during: int | None = None  # counters only (torch_xla)


def torch_trace(run_step: Callable[[int], None], first: int, steps: int, out_dir: str, device: bool) -> Captured:
    """torch.profiler over `steps` steps; the Chrome trace (Perfetto, chrome://tracing) gzipped."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    unprofiled = _unprofiled(run_step, first, steps)
    first += steps
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device else [])
    trace = None

    def on_ready(prof) -> None:
        nonlocal trace
        raw = Path(out_dir) / "torch_trace.json"
        prof.export_chrome_trace(str(raw))
        trace = _gzip(raw)

    with profile(activities=activities, record_shapes=True, schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=on_ready) as prof:
        for k in range(steps + 1):
            with record_function(f"repro_step_{k}") if k else contextlib.nullcontext():
                run_step(first + k)
            prof.step()
    return Captured(profiler=f"torch.profiler (torch {torch.__version__})", family="torch", unprofiled_ms=unprofiled,
                    files=[trace], trace=trace, viewer="Perfetto (ui.perfetto.dev) or chrome://tracing")


def jax_trace(run_step: Callable[[int], None], first: int, steps: int, out_dir: str) -> Captured:
    """jax.profiler with a Perfetto trace; the XSpace (xplane.pb) is kept for TensorBoard/XProf."""
    import jax

    log_dir = Path(out_dir) / "jax_profile"
    unprofiled = _unprofiled(run_step, first, steps)
    first += steps
    jax.profiler.start_trace(str(log_dir), create_perfetto_trace=True)
    try:
        for k in range(1, steps + 1):
            with jax.profiler.TraceAnnotation(f"repro_step_{k}"):
                run_step(first + k)
    finally:
        jax.profiler.stop_trace()
    perfetto = sorted(glob.glob(str(log_dir / "**" / "perfetto_trace.json.gz"), recursive=True))[-1]
    xplane = sorted(glob.glob(str(log_dir / "**" / "*.xplane.pb"), recursive=True))[-1]
    files = [str(Path(out_dir) / "jax_perfetto_trace.json.gz"), str(Path(out_dir) / "jax.xplane.pb")]
    shutil.copyfile(perfetto, files[0])
    shutil.copyfile(xplane, files[1])
    return Captured(profiler=f"jax.profiler (jax {jax.__version__})", family="xla", unprofiled_ms=unprofiled,
                    files=files, trace=files[0],
                    viewer="Perfetto (ui.perfetto.dev) for the .json.gz; TensorBoard/XProf for the .xplane.pb")


def _unprofiled(run_step: Callable[[int], None], first: int, steps: int) -> float:
    """The median ms of `steps` steps without the profiler, timed as the timed loop times them."""
    times = []
    for k in range(steps):
        t0 = time.perf_counter()
        run_step(first + k)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _gzip(raw: Path) -> str:
    out = raw.with_suffix(".json.gz")
    with open(raw, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    return str(out)
