"""Statistics of repeated runs: records in, numbers out (no printing, no I/O).

A config's speed is the median of its repeats' steady medians, with a 95 % percentile
bootstrap confidence interval (NumPy, seeded: the same records always give the same
interval): a description of one row. One repeat gives no interval: `ci` is None and the words
say "single sample". Whether one config is faster than another is not decided here but by the
verdict engine (report/verdict.py), which has a stated model and a measured error rate.

    ci = bootstrap_ci(steady_medians(records))      # (low, high) of a config's median; None: one repeat

A comparison's rows (one per config) are built from these in report/comparison.py.
"""

from __future__ import annotations

import numpy as np

from repro.ledger.record import view

LEVEL = 0.95
RESAMPLES = 4000
SEED = 0


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status") == "ok" and view(r).results.steady_median_s is not None]


def steady_medians(records: list[dict]) -> list[float]:
    """Each ok run's steady-state median step time (seconds)."""
    return [view(r).results.steady_median_s for r in _ok(records)]


def _interval(resampled: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(resampled, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _resampled_medians(samples, rng: np.random.Generator, resamples: int) -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    return np.median(x[rng.integers(0, len(x), size=(resamples, len(x)))], axis=1)


def bootstrap_ci(samples, level: float = LEVEL, resamples: int = RESAMPLES,
                 seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the median; None for fewer than two samples."""
    if len(samples) < 2:
        return None
    return _interval(_resampled_medians(samples, np.random.default_rng(seed), resamples), level)


def median_of(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None
