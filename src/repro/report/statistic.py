"""The verdict's statistic: one seam (`Statistic`), its members registered once by name, chosen by
`verdict.statistic` (its default written once, in config/schema.py).

A statistic turns a pair's within-round log ratios d_i = log b_i - log a_i (paired) or the two
sides' log run medians (unpaired: rounds incomplete) into an `Estimate`: the estimate d (> 0: a is
faster), its standard error se, its degrees of freedom df (the interval is d +- t_df se, the tests
of report/verdict.py read nothing else), how many rounds it trimmed from each end, and its name in
the verdict's sentence. Its calibrated null is inside se and df: where a statistic's t is not
Student's at its own degrees of freedom, its null distribution under normal noise is simulated
(seeded, `_fit`) and c t_nu fitted to it at its 95 % and 99.5 % quantiles, and se carries c and df
is nu. `rows(x)` is the same statistic on every row of a matrix at once (the resampled floor, the
calibration benchmark); a member's `paired` is its `rows` on one row.

Members (`REGISTRY`; `get(name, trim)` refuses an unknown name, naming the registered ones;
`register` refuses a name twice):
- **paired-t**: the paired t on the log ratios (rounds - 1 df); unpaired, Welch's t. Exact under
  normal noise, and one process in ten running 60 % slow takes its power (issue 48: 21 % for a 5 %
  gap at 10 rounds).
- **trimmed**: the trimmed paired t at `verdict.trim` (Tukey & McLaughlin 1963, Sankhya A 25:331;
  unpaired, Yuen 1974, Biometrika 61:165; Wilcox 2012, "Introduction to Robust Estimation and
  Hypothesis Testing", 3rd ed., §4.5 and §5.3) with its null fitted (`_null_fit`). It throws away
  rounds that carry information where no process is slow (issue 61: 25 % power at 5 rounds and 70 %
  at 10 for a 5 % gap in clean paired noise, where the paired t has 50 % and 92 %).
- **adaptive** (`Adaptive`): the trim chosen from the rounds' own tail weight, 0, trim / 2 or trim
  of each end: the trimmed t where a minority of processes is slow, the paired t where none is.

Welch and Yuen are the unpaired halves of these members (`welch`, `yuen`): a statistic is judged
paired where rounds are complete and unpaired where they are not, and its sentence says which.

Adding a statistic: a subclass of `Statistic` with `name`, `paired_rows` (and `unpaired` if not
Yuen's at the member's trim), then `register(Member)` in this module; `verdict.statistic=<name>`
chooses it and preflight refuses a name not registered.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from repro.config.schema import VerdictConfig

ALPHA = 0.05
TRIM, TRIM_MAX = VerdictConfig.trim, 0.4  # verdict.trim: the share of rounds trimmed from each end, in [0, TRIM_MAX)
STATISTIC = VerdictConfig.statistic  # verdict.statistic: the registered name the verdict uses


# ---- the statistics ------------------------------------------------------------------------
# Student's t by its regularized incomplete beta function (a continued fraction, Numerical
# Recipes §6.4), not scipy: scipy is not among repro's dependencies, and importing scipy.stats
# took 2 s in the parent that prints the table. tests/test_verdict_engine.py holds these to scipy.

def _betacf(a: float, b: float, x: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for aa in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1 - tail


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Snedecor's F with (d1, d2) degrees of freedom."""
    return _betainc(d2 / 2, d1 / 2, d2 / (d2 + d1 * f)) if f > 0 else 1.0


def t_ppf(q: float, df: float) -> float:
    """The q-quantile of Student's t (bisection on `t_sf`: a rendered interval, not a hot loop).
    q at 0 or 1 gives -inf or inf; q outside [0, 1] is an error, never an endless search."""
    if not 0 <= q <= 1 or math.isnan(df) or df <= 0:
        raise ValueError(f"t_ppf: q={q!r} must be in [0, 1] and df={df!r} > 0")
    if q < 0.5:
        return -t_ppf(1 - q, df)
    if q == 1:
        return math.inf
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
        if math.isinf(hi):  # 1 - q below what t_sf resolves
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf(mid, df) > 1 - q else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def _exp(x: float) -> float:
    """exp that gives inf, not OverflowError, for a ratio beyond floats (a test's extremes)."""
    return math.exp(x) if x < 709 else math.inf


def _inv(x: float) -> float:
    """1 / x, with a ratio that underflowed to 0 read as inf (a test's extremes)."""
    return 1 / x if x else math.inf


FLAT = 1e-9  # a spread of log times below this is the rounding of equal numbers, not noise


def _ok(m: float) -> bool:
    return isinstance(m, numbers.Real) and math.isfinite(m) and m > 0


def _logs(medians: Sequence[float]) -> list[float]:
    return [math.log(m) for m in medians if _ok(m)]


def _mean_var(x: list[float]) -> tuple[float, float]:
    m = sum(x) / len(x)
    return m, sum((v - m) ** 2 for v in x) / (len(x) - 1)


def _flat(x: list[float]) -> bool:
    return max(x) - min(x) <= FLAT


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(d, se, df): d = mean log b - mean log a (> 0: a is faster), its standard error and
    Welch–Satterthwaite degrees of freedom; both sides need two runs or more."""
    la, lb = _logs(a), _logs(b)
    (ma, va), (mb, vb) = _mean_var(la), _mean_var(lb)
    va, vb = (0.0 if _flat(la) else va), (0.0 if _flat(lb) else vb)
    qa, qb = va / len(la), vb / len(lb)
    se2 = qa + qb
    if se2 <= 0:  # identical runs (a test's constants, duplicated records): no noise seen
        return mb - ma, 0.0, float(min(len(la), len(lb)) - 1)
    df = se2 ** 2 / ((qa ** 2 / (len(la) - 1) if qa else 0) + (qb ** 2 / (len(lb) - 1) if qb else 0))
    return mb - ma, math.sqrt(se2), df


def paired_t(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(d, se, df) of the paired t: d = the mean within-round log ratio log b_i - log a_i (> 0: a
    is faster), its standard error and rounds - 1 degrees of freedom; a[i], b[i] are round i's
    run medians (two rounds or more)."""
    diffs = [math.log(y) - math.log(x) for x, y in zip(a, b)]
    m, v = _mean_var(diffs)
    if _flat(diffs):
        return m, 0.0, float(len(diffs) - 1)
    return m, math.sqrt(v / len(diffs)), float(len(diffs) - 1)


NULL_SEED, NULL_DRAWS = 20260527, 2_000_000  # the simulated null: its seed and its numbers drawn (at most 200,000 rows)
FIT_ALPHAS = (0.05, 0.005)  # the two-sided levels at which c t_nu meets the simulated null
RESAMPLE_MIN = 20  # measured log ratios a resampled floor needs


def trim_count(n: int, trim: float) -> int:
    """Runs dropped from each end of n at `trim`: floor(trim n), never leaving fewer than two."""
    return max(0, min(math.floor(trim * n + 1e-9), (n - 2) // 2))


def _trimmed_rows(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Each row's k-trimmed mean, the variance of that mean ((n - 1) s_w^2 / (h (h - 1)), s_w^2
    the k-winsorized variance) and h = n - 2k; at k = 0 the mean and s^2 / n."""
    n = x.shape[-1]
    h = n - 2 * k
    s = np.sort(x, axis=-1)
    kept = s[..., k:n - k]
    wins = np.concatenate([np.repeat(kept[..., :1], k, -1), kept, np.repeat(kept[..., -1:], k, -1)], -1)
    return kept.mean(-1), wins.var(-1, ddof=1) * (n - 1) / (h * (h - 1)), h


def _yuen_df(va, vb, ha: int, hb: int):
    """Welch–Satterthwaite degrees of freedom of Yuen's two-sample trimmed t."""
    return (va + vb) ** 2 / (va ** 2 / (ha - 1) + vb ** 2 / (hb - 1))


def _fit(stat: np.ndarray, df0: float) -> tuple[float, float]:
    """(c, nu): the scaled t, c t_nu, that meets the simulated |statistic| `stat` at its two-sided
    FIT_ALPHAS quantiles; where its tails are no heavier than t's at `df0`, nu = df0 and only c is
    fitted, else nu is found by bisection."""
    (a1, a2) = FIT_ALPHAS
    q1, q2 = np.quantile(np.abs(stat), [1 - a1, 1 - a2])
    ratio = lambda nu: t_ppf(1 - a2 / 2, nu) / t_ppf(1 - a1 / 2, nu)  # noqa: E731 (falls as nu grows)
    nu = df0
    if q2 / q1 > ratio(df0):  # heavier tails than t at df0: fewer degrees of freedom, found by bisection
        lo, hi = math.log(0.2), math.log(df0)
        for _ in range(30):  # log nu to within 1e-8 of its range: far below the simulation's own error
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ratio(math.exp(mid)) > q2 / q1 else (lo, mid)
        nu = math.exp((lo + hi) / 2)
    return float(q1) / t_ppf(1 - a1 / 2, nu), nu


def _draws(n: int) -> int:
    """Rows of a simulated null of n numbers a row (NULL_DRAWS numbers in all, 20,000-200,000 rows)."""
    return max(20_000, min(200_000, NULL_DRAWS // n))


@functools.lru_cache(maxsize=256)
def _null_fit(n_a: int, k_a: int, n_b: int = 0, k_b: int = 0) -> tuple[float, float]:
    """(c, nu): the scaled t, c t_nu, that matches the trimmed t's null distribution under normal
    noise at its two-sided FIT_ALPHAS quantiles; n_b = 0: the one-sample (paired) statistic on n_a
    log ratios, else Yuen's two-sample one. Simulated, seeded: the same (n, k) always gives the same
    fit. Where the simulated tails are no heavier than t's at the statistic's own degrees of
    freedom, nu keeps those and only c is fitted."""
    rng = np.random.default_rng(NULL_SEED)
    draws = _draws(n_a + n_b)
    ma, va, ha = _trimmed_rows(rng.standard_normal((draws, n_a)), k_a)
    if n_b:
        mb, vb, hb = _trimmed_rows(rng.standard_normal((draws, n_b)), k_b)
        return _fit((mb - ma) / np.sqrt(va + vb), float(ha + hb - 2))
    return _fit(ma / np.sqrt(va), float(ha - 1))


def trimmed_paired(a: Sequence[float], b: Sequence[float], trim: float = TRIM) -> tuple[float, float, float, int]:
    """(d, se, df, k): the trimmed paired t on the within-round log ratios (module docstring): the
    k-trimmed mean of log b_i - log a_i, its standard error scaled by the fitted c, and the fitted
    nu; k = 0 is the paired t (`paired_t`)."""
    k = trim_count(len(a), trim)
    if not k:
        return (*paired_t(a, b), 0)
    diffs = np.array([math.log(y) - math.log(x) for x, y in zip(a, b)])
    m, v, _ = _trimmed_rows(diffs, k)
    kept = np.sort(diffs)[k:len(diffs) - k]
    if kept[-1] - kept[0] <= FLAT:  # the rounds kept gave one ratio: no spread seen
        return float(m), 0.0, float(len(kept) - 1), k
    c, nu = _null_fit(len(diffs), k)
    return float(m), c * math.sqrt(float(v)), nu, k


def yuen(a: Sequence[float], b: Sequence[float], trim: float = TRIM) -> tuple[float, float, float, int]:
    """(d, se, df, k): Yuen's trimmed Welch t on the log run medians, unpaired (module docstring);
    k the most runs trimmed from an end of either side; no trimming is Welch (`welch`)."""
    la, lb = _logs(a), _logs(b)
    ka, kb = trim_count(len(la), trim), trim_count(len(lb), trim)
    if not ka and not kb:
        return (*welch(a, b), 0)
    (ma, va, ha), (mb, vb, hb) = (_trimmed_rows(np.array(x), k) for x, k in ((la, ka), (lb, kb)))
    flat = [_flat(sorted(x)[k:len(x) - k]) for x, k in ((la, ka), (lb, kb))]
    va, vb = (0.0 if flat[0] else float(va)), (0.0 if flat[1] else float(vb))
    if va + vb <= 0:
        return float(mb - ma), 0.0, float(min(ha, hb) - 1), max(ka, kb)
    c, nu = _null_fit(len(la), ka, len(lb), kb)
    df = _yuen_df(va, vb, ha, hb) if va and vb else float(ha - 1 if va else hb - 1)
    return float(mb - ma), c * math.sqrt(va + vb), min(nu, df), max(ka, kb)


def resampled_gap(ratios: Sequence[float], rounds: int, trim: float = TRIM, alpha: float = ALPHA,
                  power: float = 0.8, resamples: int = 4000, seed: int = 0, statistic: str = STATISTIC) -> float | None:
    """The smallest gap (0.05: 5 %) the verdict's `statistic` calls "faster" with probability `power`
    at `rounds` rounds, from the measured distribution of within-round log ratios, not a normal
    one: sweeps of `rounds` ratios are resampled (with replacement, seeded) from `ratios` centred
    on the statistic's own location of them (an A/A: no true gap), a gap is added to each, and each
    sweep is judged at `alpha` by the statistic's own test (`rows`: its calibrated se and df). None:
    fewer than RESAMPLE_MIN ratios (a handful resampled is mostly repeats of itself: 8 ratios gave a
    floor at 5 rounds above the one at 3), or not within a 10x gap."""
    stat = get(statistic, trim)
    d = np.array([float(x) for x in ratios if math.isfinite(x)])
    if len(d) < RESAMPLE_MIN or rounds < 2:
        return None
    d = d - stat.center(d)
    x = d[np.random.default_rng(seed).integers(0, len(d), size=(resamples, rounds))]
    m, se, df, _ = stat.rows(x)
    edge = critical(df, alpha) * se
    found = lambda g: float(np.mean((se > 0) & (m + math.log1p(g) > edge)))  # noqa: E731 (flat: never decided)
    lo, hi = 0.0, 10.0
    if found(hi) < power:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if found(mid) < power else (lo, mid)
    return hi


def critical(df: np.ndarray, alpha: float) -> np.ndarray:
    """t's two-sided critical value at `alpha` for each of `df` (a statistic's rows share a few)."""
    df = np.asarray(df, dtype=float)
    values = {v: t_ppf(1 - alpha / 2, v) for v in np.unique(df).tolist()}
    return np.vectorize(values.__getitem__, otypes=[float])(df) if df.ndim else np.array(values[float(df)])


# ---- the seam ------------------------------------------------------------------------------

def percent(share: float) -> str:
    return f"{100 * share:.3g} %"


@dataclass(frozen=True)
class Estimate:
    """What a statistic makes of a pair: d (log b - log a: > 0, a is faster), its standard error se
    (its calibrated null's scale in it), df (the t's degrees of freedom, its fitted nu where fitted),
    `trimmed` rounds (unpaired: runs) dropped from each end, and `words`, its name in the sentence."""

    d: float
    se: float
    df: float
    trimmed: int = 0
    words: str = ""


Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (d, se, df, trimmed) of each row


def _flat_rows(x: np.ndarray, k: np.ndarray | int) -> np.ndarray:
    """Whether each row's rounds kept after k from each end spread no more than FLAT (no noise seen)."""
    s = np.sort(x, axis=-1)
    n = x.shape[-1]
    k = np.broadcast_to(np.asarray(k), s.shape[:-1])
    rows = np.arange(s.shape[0])
    return s[rows, n - 1 - k] - s[rows, k] <= FLAT


class Statistic:
    """One way to judge a pair (module docstring). A member sets `name` (its `verdict.statistic`
    value) and `paired_rows`; `unpaired` is Yuen's trimmed t at its `trim` (Welch at 0), `center`
    the trimmed mean at its `trim`."""

    name = ""

    def __init__(self, trim: float = TRIM):
        self.trim = float(trim)

    def paired_rows(self, x: np.ndarray) -> Rows:
        """(d, se, df, trimmed) of each row of x (a row: one sweep's within-round log ratios), its
        calibrated null in se and df; se 0 where the rounds it keeps are flat."""
        raise NotImplementedError

    def paired_words(self, n: int, k: int, x: np.ndarray) -> str:
        raise NotImplementedError

    def rows(self, x: np.ndarray) -> Rows:
        x = np.asarray(x, dtype=float)
        return self.paired_rows(x[None, :] if x.ndim == 1 else x)

    def paired(self, a: Sequence[float], b: Sequence[float]) -> Estimate:
        """The estimate on complete rounds: a[i], b[i] are round i's run medians (two rounds or more)."""
        x = np.array([math.log(y) - math.log(v) for v, y in zip(a, b)])
        d, se, df, k = (float(v[0]) for v in self.rows(x))
        return Estimate(d, se, df, int(k), self.paired_words(len(x), int(k), x))

    def unpaired(self, a: Sequence[float], b: Sequence[float]) -> Estimate:
        """The estimate on two sides' run medians, unpaired (rounds incomplete): Yuen's trimmed Welch t
        at `trim` (`yuen`), Welch's t where nothing is trimmed."""
        d, se, df, k = yuen(a, b, self.trim)
        return Estimate(d, se, df, k, f"Yuen's trimmed t, {percent(self.trim)} trimmed" if k else "Welch")

    def center(self, d: np.ndarray) -> float:
        """A location of measured log ratios that a minority of slow processes does not move (the
        resampled floor centres on it): the trimmed mean at `trim`."""
        return float(_trimmed_rows(np.asarray(d, dtype=float), trim_count(len(d), self.trim))[0])


REGISTRY: dict[str, type[Statistic]] = {}


def register(member: type[Statistic]) -> type[Statistic]:
    """Register a statistic under its `name`, once: a name taken, or none, is refused."""
    if not member.name:
        raise ValueError(f"{member.__name__} has no name: set `name`, the verdict.statistic value that chooses it")
    if member.name in REGISTRY:
        raise ValueError(f"verdict.statistic {member.name!r} is registered already ({REGISTRY[member.name].__name__}); "
                         f"give {member.__name__} a name of its own")
    REGISTRY[member.name] = member
    return member


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def unknown(name: object) -> str | None:
    """Why `name` is not a statistic (None: it is one): the registered names, and the default."""
    if isinstance(name, str) and name in REGISTRY:
        return None
    return (f"verdict.statistic={name!r} is not a registered statistic: choose one of {', '.join(REGISTRY)} "
            f"(default verdict.statistic={STATISTIC})")


@functools.lru_cache(maxsize=64)
def get(name: str, trim: float = TRIM) -> Statistic:
    """The registered statistic `name` at `trim`; an unknown name is a ValueError naming the registered ones."""
    if (why := unknown(name)) is not None:
        raise ValueError(why)
    return REGISTRY[name](trim)


@register
class PairedT(Statistic):
    """The paired t on the log ratios, rounds - 1 degrees of freedom (Student 1908); unpaired,
    Welch's t with Welch–Satterthwaite degrees of freedom (Welch 1947). Nothing trimmed, nothing
    fitted: exact under normal noise."""

    name = "paired-t"

    def __init__(self, trim: float = 0.0):
        super().__init__(0.0)

    def paired_rows(self, x: np.ndarray) -> Rows:
        n = x.shape[-1]
        m, v, _ = _trimmed_rows(x, 0)
        se = np.where(_flat_rows(x, 0), 0.0, np.sqrt(v))
        return m, se, np.full(m.shape, n - 1.0), np.zeros(m.shape, dtype=int)

    def paired(self, a: Sequence[float], b: Sequence[float]) -> Estimate:
        d, se, df = paired_t(a, b)  # the scalar form, as it always was
        return Estimate(d, se, df, 0, self.paired_words(len(a), 0, np.empty(0)))

    def paired_words(self, n: int, k: int, x: np.ndarray) -> str:
        return f"paired t over {n} rounds"


@register
class Trimmed(Statistic):
    """The trimmed paired t at `trim` from each end (module docstring; issue 48's test): k =
    floor(trim x rounds) rounds dropped from each end, never leaving fewer than two; the trimmed
    mean, its standard error from the winsorized variance, its null c t_nu simulated under normal
    noise (`_null_fit`). Below 5 rounds at 0.2 (k = 0) it is the paired t."""

    name = "trimmed"

    def paired_rows(self, x: np.ndarray) -> Rows:
        n = x.shape[-1]
        k = trim_count(n, self.trim)
        m, v, _ = _trimmed_rows(x, k)
        c, nu = _null_fit(n, k) if k else (1.0, n - 1.0)
        se = np.where(_flat_rows(x, k), 0.0, c * np.sqrt(v))
        return m, se, np.full(m.shape, float(nu)), np.full(m.shape, k)

    def paired(self, a: Sequence[float], b: Sequence[float]) -> Estimate:
        d, se, df, k = trimmed_paired(a, b, self.trim)  # the scalar form, as it always was
        return Estimate(d, se, df, k, self.paired_words(len(a), k, np.empty(0)))

    def paired_words(self, n: int, k: int, x: np.ndarray) -> str:
        if k:
            return f"trimmed paired t over {n} rounds, {percent(self.trim)} trimmed"
        return f"paired t over {n} rounds" + (", too few to trim" if self.trim else "")


ADAPT_MIN = 7  # rounds from which the adaptive statistic chooses a trim (below: the paired t)
CUTS = (0.95, 0.99)  # the tail weight's quantiles under normal noise past which trim / 2 and trim are chosen


def tail_weight(x: np.ndarray) -> np.ndarray:
    """Hogg's Q of each row (Hogg 1974, JASA 69:909): (U_0.05 - L_0.05) / (U_0.5 - L_0.5), U_b and
    L_b the means of the largest and smallest n b numbers of the row (the boundary one weighted by
    its fraction). Location and scale drop out; 2.59 for normal noise in the limit, larger where a
    few numbers lie far out. At 10 rounds of normal noise its median is 2.07; one process in ten 60 %
    slow puts it at 3.1."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    s = np.sort(x, axis=-1)

    def top(beta: float) -> np.ndarray:
        share, w = n * beta, np.zeros(n)
        whole = math.floor(share + 1e-9)
        w[n - whole:] = 1.0
        if share - whole > 1e-9:
            w[n - whole - 1] = share - whole
        return w / share

    tail, half = top(0.05), top(0.5)
    spread = s @ half - s @ half[::-1]
    return (s @ tail - s @ tail[::-1]) / np.where(spread > 0, spread, np.inf)


def _branches(x: np.ndarray, trim: float, q: np.ndarray, cuts: tuple[float, float]) -> Rows:
    """(d, se, nu, k) of each row at the trim its tail weight q chooses, each branch's se scaled by
    its own trimmed t's null fit (c of `_null_fit`; 1 untrimmed)."""
    n = x.shape[-1]
    k = np.where(q >= cuts[1], trim_count(n, trim), np.where(q >= cuts[0], trim_count(n, trim / 2), 0))
    m, se, nu = np.zeros(len(x)), np.zeros(len(x)), np.zeros(len(x))
    for kk in np.unique(k).tolist():
        pick = k == kk
        m[pick], v, _ = _trimmed_rows(x[pick], kk)
        c, nu[pick] = _null_fit(n, kk) if kk else (1.0, n - 1.0)
        se[pick] = c * np.sqrt(v)
    return m, se, nu, k


@functools.lru_cache(maxsize=128)
def _adaptive_null(n: int, trim: float) -> tuple[float, float, float, float]:
    """(cut at trim / 2, cut at trim, g, nu) of the adaptive statistic at n rounds: the tail weight's
    CUTS quantiles under normal noise, and the scaled t, g t_nu, fitted to the whole procedure's
    null (the choice included) under normal noise. Simulated, seeded (`NULL_SEED`)."""
    x = np.random.default_rng(NULL_SEED + 1).standard_normal((_draws(n), n))
    q = tail_weight(x)
    cuts = tuple(float(c) for c in np.quantile(q, CUTS))
    m, se, _, _ = _branches(x, trim, q, cuts)  # type: ignore[arg-type]
    g, nu = _fit(m / se, n - 1.0)
    return cuts[0], cuts[1], g, nu


@register
class Adaptive(Statistic):
    """The trimmed paired t with its trim chosen from the rounds' own tail weight (an adaptive
    trimmed mean in Hogg's manner: Hogg 1974, "Adaptive robust procedures", JASA 69:909–923, which
    selects among trimmed means by the tail-weight measure Q, `tail_weight`).

    From ADAPT_MIN (7) rounds: where a sweep's Q is past its 95 % quantile under normal noise at
    that many rounds, trim / 2 is dropped from each end (10 % at the default verdict.trim=0.2);
    past its 99 % quantile, trim (20 %); else nothing: the rounds carry information and the plain
    paired t keeps it. Each branch is the trimmed t with its own fitted null (`_null_fit`), and
    the whole procedure, the choice included, is fitted again under normal noise (`_adaptive_null`:
    g t_nu at its 95 % and 99.5 % quantiles), because a choice made from the data is not free: with
    each branch's fit alone, normal noise gave 6.2 % false "faster" at 10 rounds (simulated). Q does
    not move with a shift of every ratio, so the choice is the same under a gap and under none.
    Below 7 rounds the paired t: a trim chosen from 5 ratios made the fitted null's tails so
    heavy (nu 1.6 at 5 rounds) that it lost power everywhere, and 1 of 5 trimmed gains nothing
    where processes are slow (23 % against the paired t's 24 % for a 5 % gap, simulated).
    Simulated (benchmarks/verdict_calibration.py): in clean paired noise (2 % own, a 3 % position
    effect) the paired t's power, 50 % at 5 rounds and 91 % at 10 for a 5 % gap; with one process
    in ten 60 % slow, 59 % at 10 (the paired t 21 %, the fixed 20 % trim 62 %)."""

    name = "adaptive"

    def paired_rows(self, x: np.ndarray) -> Rows:
        n = x.shape[-1]
        if n < ADAPT_MIN or not trim_count(n, self.trim):
            return PairedT().paired_rows(x)
        lo, hi, g, nu = _adaptive_null(n, self.trim)
        m, se, _, k = _branches(x, self.trim, tail_weight(x), (lo, hi))
        return m, np.where(_flat_rows(x, k), 0.0, g * se), np.full(m.shape, nu), k

    def paired_words(self, n: int, k: int, x: np.ndarray) -> str:
        if n < ADAPT_MIN or not trim_count(n, self.trim):
            return f"paired t over {n} rounds" + (", too few to trim" if self.trim else "")
        q = float(tail_weight(x)[()]) if x.size else float("nan")
        share = self.trim if k == trim_count(n, self.trim) else self.trim / 2
        trimmed = f"{percent(share)} trimmed" if k else "none trimmed"
        return f"adaptive trimmed paired t over {n} rounds, {trimmed} (tail weight {q:.2f})"
