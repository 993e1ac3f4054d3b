"""A known gap, for `repro calibrate --gap G` alone: the power of a verdict is measured by giving
one of two identical configs a known extra share of its step time and counting how often the
verdict finds it.

The extra time is a busy-wait after each step's synchronisation, inside the timed region, of G
times the step's own median measured on the run's warm-up steps (so a 5 % gap is 5 % of this
run's step, whatever the model and machine); the warm-up and the first two steps run as they are.
A busy-wait, not a sleep: a sleeping process frees its core, and on a loaded host the gap would
then be a gift of CPU to the other side. It reaches a worker only through its spec
(config/workerspec.py `injected_gap`), which only calibrate's jobs set, and the run records it
(`results.injected_gap`).
"""

from __future__ import annotations

import statistics
import time


class WithGap:
    """A workload whose steps from `warmup` on take `gap` times longer, by a busy-wait."""

    def __init__(self, workload, gap: float, warmup: int):
        self._workload, self.gap, self.warmup = workload, gap, max(2, warmup)
        self._times: list[float] = []
        self._i, self._t0, self.extra_s = 0, 0.0, None

    def __getattr__(self, name):
        return getattr(self._workload, name)

    def step(self, i: int):
        self._i, self._t0 = i, time.perf_counter()
        return self._workload.step(i)

    def sync(self, out) -> None:
        self._workload.sync(out)
        if self._i < self.warmup:
            if self._i >= 1:  # the second step on: compile is over
                self._times.append(time.perf_counter() - self._t0)
            return
        if self.extra_s is None:
            self.extra_s = self.gap * statistics.median(self._times or [time.perf_counter() - self._t0])
        end = time.perf_counter() + self.extra_s
        while time.perf_counter() < end:
            pass

    def record(self) -> dict:
        return {"gap": self.gap, "extra_s": self.extra_s, "calibrated_on_steps": len(self._times)}
