"""A known gap, for `repro calibrate --gap G` alone: the power of a verdict is measured by giving
one of two identical configs a known extra share of its step time and counting how often the
verdict finds it.

The extra time is a busy-wait after each step's synchronisation, inside the timed region, of G
times the median of this run's own steady steps measured without it (so a 5 % gap is 5 % of this
run's steady step, whatever the model and machine). The median is a running one: it starts from
the warm-up steps after the compile step and follows every unslowed steady step, kept in a sorted
list (`bisect.insort`: under a microsecond at 5,000 steps, done while the busy-wait runs, so it
adds nothing beyond the extra time; a full `statistics.median` over 5,000 steps takes 0.4 ms, more
than a tiny MLP's whole 5 % of 0.2 ms). It follows the steady state because the warm-up steps are
slower than the steady ones: an extra fixed at G times their median made a 5 % gap 7.2 % of the
steady step (jax vit tiny, 2-core VM, 2026-11-27; calibrate prints the gap it measured beside the
one asked for).
A busy-wait, not a sleep: a sleeping process frees its core, and on a loaded host the gap would
then be a gift of CPU to the other side. It reaches a worker only through its spec
(config/workerspec.py `injected_gap`), which only calibrate's jobs set, and the run records it
(`results.injected_gap`).
"""

from __future__ import annotations

import bisect
import statistics
import time


class WithGap:
    """A workload whose steps from `warmup` on take `gap` times their unslowed steady median longer,
    by a busy-wait."""

    def __init__(self, workload, gap: float, warmup: int):
        self._workload, self.gap, self.warmup = workload, gap, max(2, warmup)
        self._times: list[float] = []  # warm-up steps after the compile step, unslowed
        self._steady: list[float] = []  # steady steps, their time before the busy-wait, sorted
        self._i, self._t0, self.extra_s, self.first_extra_s = 0, 0.0, None, None

    def __getattr__(self, name):
        return getattr(self._workload, name)

    def step(self, i: int):
        self._i, self._t0 = i, time.perf_counter()
        return self._workload.step(i)

    def sync(self, out) -> None:
        self._workload.sync(out)
        done = time.perf_counter()
        if self._i < self.warmup:
            if self._i >= 1:  # the second step on: compile is over
                self._times.append(done - self._t0)
            return
        if self.extra_s is None:
            self.extra_s = self.first_extra_s = self.gap * statistics.median(self._times or [done - self._t0])
        end = done + self.extra_s  # fixed before the update below, which runs inside the wait
        bisect.insort(self._steady, done - self._t0)
        self.extra_s = self.gap * self._median()
        while time.perf_counter() < end:
            pass

    def _median(self) -> float:
        n = len(self._steady)  # sorted: the middle, or the mean of the two middles
        return (self._steady[(n - 1) // 2] + self._steady[n // 2]) / 2

    def record(self) -> dict:
        return {"gap": self.gap, "extra_s": self.extra_s, "first_extra_s": self.first_extra_s,
                "calibrated_on": "running median of the unslowed steady steps", "steady_steps": len(self._steady),
                "steady_median_unslowed_s": self._median() if self._steady else None}
