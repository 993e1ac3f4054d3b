"""The timed loop: every step synchronised; first, second and steady-state times apart.

Nothing but the step and its synchronisation sits between the two clock reads. The loss is
read and progress reported after the clock stops (progress at most every 0.2 s).
"""

from __future__ import annotations

import hashlib
import statistics
import time
from typing import Callable

import numpy as np

PROGRESS_EVERY_S = 0.2


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def loss_sha256(losses: list[float]) -> str:
    return hashlib.sha256(np.asarray(losses, dtype=np.float32).tobytes()).hexdigest()


def timed_loop(workload, steps: int, emit: Callable[..., None]) -> tuple[list[float], list[float]]:
    times: list[float] = []
    losses: list[float] = []
    clock = time.perf_counter
    last_report = 0.0
    for i in range(steps):
        t0 = clock()
        out = workload.step(i)
        workload.sync(out)
        t1 = clock()
        times.append(t1 - t0)
        losses.append(workload.loss(out))
        if t1 - last_report >= PROGRESS_EVERY_S or i < 2 or i == steps - 1:
            emit("step", step=i + 1, steps=steps, step_s=times[-1], loss=losses[-1])
            last_report = t1
    return times, losses


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
        "samples_per_s": batch_size / median,
        "final_loss": losses[-1],
        "loss_sha256": loss_sha256(losses),
    }
