"""Where a series of run medians changed, and by how much: pure numpy, no I/O.

The method: **E-Divisive means** (Matteson & James 2014, "A Nonparametric Approach for Multiple
Change Point Analysis of Multivariate Data", JASA 109:334), the detector MongoDB's performance CI
built on (Daly et al., ICPE 2020, "The Use of Change Point Detection to Identify Software
Performance Regressions in a Continuous Integration System") and Hunter / Apache Otava run on
benchmark histories (Fleming et al., ICPE 2023, "Hunter: Using Change Point Detection to Hunt
for Performance Regressions"):

- the series is taken in log space (run-to-run noise is a factor, report/verdict.py's model);
- for a segment z of N points, each split tau (both sides at least `min_segment` points) gets the
  energy statistic of its two sides X = z[:tau] (m points) and Y = z[tau:] (n points),
      Q(tau) = m n / (m + n) * (2/(mn) sum|x - y| - 1/C(m,2) sum_{i<k}|x_i - x_k| - 1/C(n,2) sum_{j<k}|y_j - y_k|)
  (distance exponent 1, Otava's default), all splits at once from the prefix sums of the
  segment's distance matrix;
- divisive search: of every current segment's best split, the one with the largest Q is tested;
- its significance by a permutation test, as Matteson & James do: the segment's points shuffled
  (`permutations` times, numpy's PCG64 at `seed`: the same series always gives the same answer),
  the largest Q over the shuffled segment's splits each time; p = (1 + shuffles with a Q at
  least the observed) / (1 + shuffles). p <= `alpha` (0.001, Otava's default threshold) is a
  change, and the search goes on in the two new segments; the first split that is not
  significant ends it. 1999 shuffles put p's floor at 0.0005, under 0.001; the test stops
  shuffling once p can no longer reach `alpha` (a flat series costs a batch of shuffles);
- Otava's window of 50 points is not used: every split is searched over its whole segment,
  O(N^2) work a shuffle and O(N) memory.

The size of a change: the ratio after/before of the two segments on either side of it (each
from the change before it to the change after it), estimated by the verdict engine's robust
two-sample statistic (report/verdict.py `yuen`: Yuen's 20 %-trimmed Welch t on the log run
medians, a slow process or two trimmed) with its 95 % interval, exp(d -+ t se). The medians of
the two segments are given beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from repro.report import verdict

ALPHA = 0.001  # p at most this is a change (Otava's default)
MIN_SEGMENT = 5  # points on each side of a split, at least
PERMUTATIONS = 1999  # p's floor 1 / 2000, under ALPHA
SEED = 0
LEVEL = 0.95  # a step's interval
BATCH = 250  # shuffles drawn at once (the test may stop after any batch)


@dataclass(frozen=True)
class Change:
    """A change between point `index - 1` and point `index` of a series (0-based)."""

    index: int  # the first point after the change
    p: float  # the permutation test's p
    q: float  # the energy statistic of the split
    ratio: float  # after / before (Yuen's trimmed ratio of the adjacent segments)
    lo: float  # its interval at LEVEL
    hi: float
    before_median: float  # the medians of the adjacent segments (the series' unit)
    after_median: float
    before_n: int
    after_n: int

    @property
    def slower(self) -> bool:
        return self.ratio > 1

    def to_dict(self) -> dict:
        return {"index": self.index, "p": self.p, "q": self.q, "ratio": self.ratio, "lo": self.lo, "hi": self.hi,
                "before_median": self.before_median, "after_median": self.after_median,
                "before_n": self.before_n, "after_n": self.after_n}


def _before(w: np.ndarray) -> np.ndarray:
    """sum_{i<k} |w_k - w_i| for each k of each row of `w` (..., N): one point's distances to
    the points before it (the strict lower triangle's row sums of the distance matrix), a row
    of work per k, never an N x N matrix per row."""
    out = np.zeros_like(w)
    for k in range(1, w.shape[-1]):
        out[..., k] = np.abs(w[..., k:k + 1] - w[..., :k]).sum(-1)
    return out


def _q(row_sums: np.ndarray, before: np.ndarray, min_segment: int) -> np.ndarray:
    """Q(tau) for tau = min_segment .. N - min_segment from each point's distance sums to all
    points (`row_sums`) and to the points before it (`before`), in series order (..., N)."""
    n = row_sums.shape[-1]
    rows = np.cumsum(row_sums, -1)  # rows[t-1]: the distance sums of X = the first t points to all
    low = np.cumsum(before, -1)  # low[t-1]: sum over pairs within X
    tau = np.arange(min_segment, n - min_segment + 1)
    xx = 2 * low[..., tau - 1]  # sum over X x X (both orders)
    xy = rows[..., tau - 1] - xx
    yy = rows[..., -1:] - 2 * rows[..., tau - 1] + xx
    m, k = tau.astype(float), (n - tau).astype(float)
    e = 2 * xy / (m * k) - xx / (m * (m - 1)) - yy / (k * (k - 1))
    return m * k / (m + k) * e


def best_split(values: Sequence[float], min_segment: int = MIN_SEGMENT) -> tuple[int, float] | None:
    """(tau, Q): the split of `values` (log scale already) with the largest energy statistic,
    tau the first index of its right side; None when the segment is too short to split."""
    z = np.asarray(values, dtype=float)
    if len(z) < 2 * min_segment:
        return None
    q = _q(np.abs(z[:, None] - z[None, :]).sum(-1), _before(z), min_segment)
    i = int(np.argmax(q))
    return i + min_segment, float(q[i])


def permutation_p(values: Sequence[float], q_observed: float, min_segment: int = MIN_SEGMENT,
                  permutations: int = PERMUTATIONS, alpha: float = ALPHA,
                  rng: np.random.Generator | None = None) -> float:
    """The permutation p of a segment's best split (its largest Q over splits against the
    shuffled segments'). Shuffles are drawn BATCH at a time and the test stops once p can no
    longer be at most `alpha`: then the p returned is the lower bound seen so far (above alpha)."""
    z = np.asarray(values, dtype=float)
    n = len(z)
    rng = rng or np.random.default_rng(SEED)
    row_sums = np.abs(z[:, None] - z[None, :]).sum(-1)  # a point's distances to all: the same in any order
    allowed = math.floor(alpha * (permutations + 1) - 1 + 1e-9)  # shuffles at least as large p <= alpha allows
    done = exceed = 0
    while done < permutations:
        size = min(BATCH, permutations - done)
        perms = rng.permuted(np.tile(np.arange(n), (size, 1)), axis=1)
        q = _q(row_sums[perms], _before(z[perms]), min_segment).max(-1)
        exceed += int(np.count_nonzero(q >= q_observed * (1 - 1e-12)))
        done += size
        if exceed > allowed:
            return (1 + exceed) / (1 + done)
    return (1 + exceed) / (1 + permutations)


def change_indices(values: Sequence[float], alpha: float = ALPHA, min_segment: int = MIN_SEGMENT,
                   permutations: int = PERMUTATIONS, seed: int = SEED) -> list[tuple[int, float, float]]:
    """E-Divisive means on `values` (positive: taken in log space): [(index, p, Q)] of each
    change found, in index order (index: the first point after it)."""
    z = np.log(np.asarray(values, dtype=float))
    if not np.all(np.isfinite(z)):
        raise ValueError("change_indices: every value must be positive and finite")
    rng = np.random.default_rng(seed)
    bounds = [0, len(z)]
    found: list[tuple[int, float, float]] = []
    best: dict[tuple[int, int], tuple[int, float] | None] = {}
    while True:
        candidates = []
        for a, b in zip(bounds, bounds[1:]):
            if (a, b) not in best:
                split = best_split(z[a:b], min_segment)
                best[(a, b)] = None if split is None else (a + split[0], split[1])
            if best[(a, b)] is not None:
                candidates.append(((a, b), *best[(a, b)]))
        if not candidates:
            break
        (a, b), tau, q = max(candidates, key=lambda c: c[2])
        if q <= 0:
            break
        p = permutation_p(z[a:b], q, min_segment, permutations, alpha, rng)
        if p > alpha:
            break
        found.append((tau, p, q))
        bounds = sorted([*bounds, tau])
    return sorted(found)


def step(before: Sequence[float], after: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(ratio, lo, hi): after / before by the verdict engine's Yuen trimmed t on log values, with
    its `level` interval; (ratio, ratio, ratio) where neither side shows any spread."""
    d, se, df, _ = verdict.yuen(before, after)
    if se <= 0:
        r = math.exp(d)
        return r, r, r
    half = verdict.t_ppf(1 - (1 - level) / 2, df) * se
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def changes(values: Sequence[float], alpha: float = ALPHA, min_segment: int = MIN_SEGMENT,
            permutations: int = PERMUTATIONS, seed: int = SEED, level: float = LEVEL) -> list[Change]:
    """Every change of `values` (positive numbers in time order: run medians), with its step."""
    found = change_indices(values, alpha, min_segment, permutations, seed)
    cuts = [0, *(i for i, _, _ in found), len(values)]
    out = []
    for k, (index, p, q) in enumerate(found, start=1):
        before, after = list(values[cuts[k - 1]:index]), list(values[index:cuts[k + 1]])
        ratio, lo, hi = step(before, after, level)
        out.append(Change(index, p, q, ratio, lo, hi, float(np.median(before)), float(np.median(after)),
                          len(before), len(after)))
    return out
