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
from pathlib import Path
from typing import Callable

STEPS = 5  # profiled steps (after one warm-up step); the median one is reported


def torch_trace(run_step: Callable[[int], None], first: int, steps: int, out_dir: str, device: bool) -> dict:
    """torch.profiler over `steps` steps; the Chrome trace (Perfetto, chrome://tracing) gzipped."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    unprofiled = _unprofiled(run_step, first, steps)
    first += steps
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device else [])
    done = {}

    def on_ready(prof) -> None:
        raw = Path(out_dir) / "torch_trace.json"
        prof.export_chrome_trace(str(raw))
        done["path"] = _gzip(raw)

    with profile(activities=activities, record_shapes=True, schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=on_ready) as prof:
        for k in range(steps + 1):
            with record_function(f"repro_step_{k}") if k else contextlib.nullcontext():
                run_step(first + k)
            prof.step()
    return {"profiler": f"torch.profiler (torch {torch.__version__})", "family": "torch", "unprofiled_ms": unprofiled,
            "files": [done["path"]], "trace": done["path"], "viewer": "Perfetto (ui.perfetto.dev) or chrome://tracing"}


def jax_trace(run_step: Callable[[int], None], first: int, steps: int, out_dir: str) -> dict:
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
    return {"profiler": f"jax.profiler (jax {jax.__version__})", "family": "xla", "unprofiled_ms": unprofiled,
            "files": files, "trace": files[0],
            "viewer": "Perfetto (ui.perfetto.dev) for the .json.gz; TensorBoard/XProf for the .xplane.pb"}


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
