"""Statistics of repeated runs: records in, numbers out (no printing, no I/O).

A config's speed is the median of its repeats' steady medians, with a 95 % percentile
bootstrap confidence interval (NumPy, seeded: the same records always give the same
interval). Two configs compare by the ratio of those medians, with a 95 % CI from resampling
each side's repeats independently. One repeat gives no interval: `ci` is None and the words
say "single sample".

    ci = bootstrap_ci(steady_medians(records))      # (low, high) of a config's median; None: one repeat
    v = compare("jax", a_records, "torch", b_records, "mlp/tiny")  # Verdict(..., text)

A comparison's rows (one per config) are built from these in report/comparison.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 4000
SEED = 0


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status") == "ok" and "steady_median_s" in (r.get("results") or {})]


def steady_medians(records: list[dict]) -> list[float]:
    """Each ok run's steady-state median step time (seconds)."""
    return [r["results"]["steady_median_s"] for r in _ok(records)]


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


def ratio_ci(numerator, denominator, level: float = LEVEL, resamples: int = RESAMPLES,
             seed: int = SEED) -> tuple[float, tuple[float, float] | None]:
    """median(numerator) / median(denominator) and its bootstrap CI (None unless both sides
    have at least two samples); each side's samples are resampled independently."""
    ratio = float(np.median(numerator) / np.median(denominator))
    if min(len(numerator), len(denominator)) < 2:
        return ratio, None
    rng = np.random.default_rng(seed)
    return ratio, _interval(_resampled_medians(numerator, rng, resamples) /
                            _resampled_medians(denominator, rng, resamples), level)


def median_of(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


@dataclass(frozen=True)
class Verdict:
    faster: str
    slower: str
    ratio: float  # slower's median / faster's median (>= 1)
    ci: tuple[float, float] | None  # 95 % CI of that ratio; None: a single sample on a side
    within_noise: bool  # the CI includes 1
    text: str


def _repeats_words(n_a: int, n_b: int, interleaved: bool) -> str:
    each = f"{n_a} repeats each" if n_a == n_b else f"{n_a} and {n_b} repeats"
    return each + (", interleaved" if interleaved else "")


def compare(name_a: str, records_a: list[dict], name_b: str, records_b: list[dict], what: str,
            interleaved: bool = False) -> Verdict:
    """Which of two configs is faster (steady medians), by how much, and whether noise could
    explain it. `what` names what they share ("mlp/tiny"); `interleaved`: their repeats ran
    A B, A B, ... in one sweep."""
    a, b = steady_medians(records_a), steady_medians(records_b)
    if not a or not b:
        raise ValueError(f"{name_a if not a else name_b} has no ok run to compare")
    ratio, ci = ratio_ci(a, b)  # > 1: a is slower
    if ratio < 1:
        (name_a, a), (name_b, b) = (name_b, b), (name_a, a)
        ratio, ci = 1 / ratio, (None if ci is None else (1 / ci[1], 1 / ci[0]))
    faster, slower = name_b, name_a
    if ci is None:
        text = (f"{faster} is {ratio:.2f}× faster than {slower} on {what} (single sample: "
                "no interval can be given; run.repeats=3 gives one)")
        return Verdict(faster, slower, ratio, None, False, text)
    if ci[0] <= 1.0:
        first, second = sorted((faster, slower))
        r = ratio if first == slower else 1 / ratio
        lo, hi = (ci[0], ci[1]) if first == slower else (1 / ci[1], 1 / ci[0])
        text = (f"{first} and {second} are within noise on {what} (ratio {r:.2f}, 95 % CI {lo:.2f}–{hi:.2f}, "
                f"{_repeats_words(len(a), len(b), interleaved)})")
        return Verdict(faster, slower, ratio, ci, True, text)
    text = (f"{faster} is {ratio:.2f}× faster than {slower} on {what} (95 % CI {ci[0]:.2f}–{ci[1]:.2f}, "
            f"{_repeats_words(len(b), len(a), interleaved)})")
    return Verdict(faster, slower, ratio, ci, False, text)
