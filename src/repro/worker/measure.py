"""The timed loop: every step synchronised; first, second and steady-state times apart.

Nothing but the step and its synchronisation sits between the two clock reads. The loss is
read and progress reported after the clock stops (progress at most once a second). How many
steps: worker/window.py (a fixed count, or until the steady window is long enough).
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from typing import Callable

from repro.worker.window import StepPlan, sampling

PROGRESS_EVERY_S = 1.0  # a step event at most once a second: the parent wakes for each


def percentile(values: list[float], q: float) -> float:
    import numpy as np  # NumPy is imported with the framework, after this module (worker/worker.py)

    return float(np.percentile(np.asarray(values), q))


def loss_sha256(losses: list[float]) -> str:
    import numpy as np

    return hashlib.sha256(np.asarray(losses, dtype=np.float32).tobytes()).hexdigest()


def timed_loop(workload, plan: StepPlan, emit: Callable[..., None]) -> tuple[list[float], list[float]]:
    """Steps until `plan` says the window is done (worker/window.py); their times and losses."""
    times: list[float] = []
    losses: list[float] = []
    clock = time.perf_counter
    last_report = 0.0
    steady_s = 0.0
    i = 0
    while not plan.done(i, steady_s):
        t0 = clock()
        out = workload.step(i)
        workload.sync(out)
        t1 = clock()
        times.append(t1 - t0)
        if i >= plan.warmup:
            steady_s += t1 - t0
        losses.append(workload.loss(out))
        i += 1
        if t1 - last_report >= PROGRESS_EVERY_S or i <= 2 or plan.done(i, steady_s):
            emit("step", step=i, steps=i if plan.done(i, steady_s) else _expected(plan, i, steady_s),
                 step_s=times[-1], loss=losses[-1])
            last_report = t1
    return times, losses


def _expected(plan: StepPlan, taken: int, steady_s: float) -> int:
    """The loop's total as far as it can be told after `taken` steps (for the progress bar)."""
    if plan.fixed is not None:
        return plan.fixed
    steady = taken - plan.warmup
    want = plan.min_steady_steps
    if steady > 0 and steady_s > 0:
        want = max(want, math.ceil(plan.min_steady_s * steady / steady_s))
    return max(taken, min(plan.max_steps, plan.warmup + want))


def summarise(times: list[float], losses: list[float], warmup: int, batch_size: int) -> dict:
    steady = times[warmup:]
    median = statistics.median(steady)
    return {
        "first_step_s": times[0],
        "second_step_s": times[1],
        "steady_median_s": median,
        "steady_p10_s": percentile(steady, 10),
        "steady_p90_s": percentile(steady, 90),
        "steady_mean_s": statistics.fmean(steady),
        "steady_steps": len(steady),
        "steps": len(times),
        "samples_per_s": batch_size / median,
        "final_loss": losses[-1],
        "loss_sha256": loss_sha256(losses),
        **sampling(steady),
    }
