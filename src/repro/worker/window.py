"""The steady window: how many steps a run measures, and how precise its steady median is.

Two ways to choose the count (`run.steps`):
- a whole number N: exactly N timed steps, the first (compile) and second included, as always;
- `auto` (the default): after the first two and the warm-up (`run.warmup` counts them), steady
  steps go on until there are at least `run.min_steady_steps` of them AND they took at least
  `run.min_steady_s` together (the sum of their timed durations), whichever comes later, or
  until the run has taken `run.max_steps` steps in all. A 7 ms step thus measures ~1 s (143
  steps would do, 200 is the floor); a 0.2 ms step measures 5000 steps. The count then depends on
  the machine's speed: the run's outputs (loss and parameter hashes) are those of the steps it
  took (`results.steps`): runs that took the same count are bitwise alike, `repro replay` of an
  adaptive run takes the count it took (`replay_steps`), and a fixed `run.steps=N` makes every
  run of a config take the same count. A run of several processes (sharded over ranks or JAX
  processes) takes `shared_count`: the warm-up plus run.min_steady_steps.

After the window has closed, the sampling SD of the steady median is estimated by a moving-block
bootstrap (Künsch 1989): step times are autocorrelated (lag-1 ρ of 0.3–0.4 was measured on a GPU),
so resampling single steps would understate it. Block length: the rule for the variance of a
smooth statistic of an AR(1)-like series (Hall, Horowitz & Jing 1995; Bühlmann & Künsch 1999),
b = (3n/2)^(1/3) · (2ρ/(1−ρ²))^(2/3) with ρ the series' measured lag-1 autocorrelation, clamped to
[1, n/5]: with ρ ≤ 0 it is 1 (steps independent), at ρ = 0.4 and n = 200 it is 7. It runs in the
worker after the window closed (never inside it), with a fixed seed, in well under 0.1 s for
10 000 steps.

The record keeps the step times and losses of the first SERIES_STEPS steps only (what the loss
overlay, the per-step time plot and the trajectory agreement read); the loss hash and every
statistic are of all steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a worker's first import of NumPy is its framework's (worker/worker.py)
    import numpy as np

AUTO = "auto"
SERIES_STEPS = 256  # steps whose time and loss a record keeps: ~10 kB of JSON at most
BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class StepPlan:
    """When the timed loop stops: `fixed` steps, or the adaptive rule (see the module's doc)."""

    fixed: int | None
    warmup: int
    min_steady_steps: int
    min_steady_s: float
    max_steps: int

    @classmethod
    def of(cls, run, taken: int | None = None) -> "StepPlan":
        """The plan of a typed `run` config group; `taken`: the count an adaptive run took, to be taken
        again (a replay: `replay_steps`)."""
        fixed = int(run.steps) if not adaptive(run.steps) else taken
        return cls(fixed, run.warmup, run.min_steady_steps, run.min_steady_s, run.max_steps)

    @property
    def most(self) -> int:
        """The most steps the loop can take."""
        return self.fixed if self.fixed is not None else self.max_steps

    def done(self, taken: int, steady_s: float) -> bool:
        """Whether the loop stops after `taken` steps, the steady ones (those after the warm-up)
        having taken `steady_s` seconds together."""
        if self.fixed is not None:
            return taken >= self.fixed
        if taken >= self.max_steps:
            return True
        steady = taken - self.warmup
        return steady >= self.min_steady_steps and steady_s >= self.min_steady_s


def adaptive(steps) -> bool:
    return steps == AUTO


def shared_count(run) -> int:
    """The count every process of a run of several takes under run.steps=auto: the warm-up plus
    run.min_steady_steps. Their steps meet in collectives, so they cannot each stop when their own
    clock says; a count known to all without asking is the one that cannot deadlock."""
    return run.warmup + run.min_steady_steps


def replay_steps(record: dict) -> int | None:
    """The count a replay of `record` takes: the steps an adaptive run took (None: its config's own)."""
    if adaptive(((record.get("config") or {}).get("run") or {}).get("steps")):
        return (record.get("results") or {}).get("steps")
    return None


def most_steps(run) -> int:
    """The most steps a run of this `run` config group takes (its batches, its spool's room)."""
    return StepPlan.of(run).most


def lag1(x: np.ndarray) -> float:
    """The lag-1 autocorrelation of a series (0 where it has no spread)."""
    d = x - x.mean()
    den = float(d @ d)
    return float(d[1:] @ d[:-1]) / den if den > 0 else 0.0


def block_length(n: int, rho: float) -> int:
    """The moving-block bootstrap's block length for `n` values of lag-1 autocorrelation `rho`."""
    if n < 2 or rho <= 0:
        return 1
    rho = min(rho, 0.99)
    b = (1.5 * n) ** (1 / 3) * (2 * rho / (1 - rho * rho)) ** (2 / 3)
    return int(max(1, min(math.ceil(b), n // 5)))


def median_sd(values, block: int | None = None, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> tuple[float, int]:
    """(the moving-block bootstrap SD of the median of `values`, the block length used)."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 3:
        return 0.0, 1
    b = block or block_length(n, lag1(x))
    rng = np.random.default_rng(seed)
    blocks = -(-n // b)
    starts = rng.integers(0, n - b + 1, size=(resamples, blocks))
    idx = (starts[:, :, None] + np.arange(b)).reshape(resamples, -1)[:, :n]
    medians = np.median(x[idx], axis=1)
    return float(medians.std(ddof=1)), b


def sampling(steady: list[float]) -> dict:
    """The record's fields for the steady window's own sampling noise."""
    sd, b = median_sd(steady)
    return {"steady_median_sd_s": sd, "steady_block_len": b}
