"""The verdict engine: is A faster than B, equivalent to it, or can we not tell yet? One place.

Every view (the terminal table, report.md, results.csv, the MLflow parent's note, `repro
compare`, `repro.compare`, `repro.verdict`) renders a `Verdict`, whose `text` is the only place
its sentence is made; `run.repeats=auto` (repro/repeats.py) stops on the same verdicts.

The model (what is assumed, and why)
- **Runs are the independent unit.** A run is a fresh worker process: its allocator, thread
  placement, cache layout and the machine's frequency and load are drawn once per run, so the
  steps inside one run share them and are not independent samples (treating a run's hundreds
  of steps as samples gave "98.77× faster" intervals far too narrow). The within-run steps are
  used once, and only there: each run is reduced to its steady-state median step time, a
  location that one slow step (a GC pause, a page fault) cannot move.
- **Multiplicative noise.** Run-to-run noise is a factor (lognormal), so each run's median is
  taken in log space; the ratio of two configs is exp(difference of mean log medians), the
  geometric-mean ratio, and its interval comes from Welch's t (unequal variances: JAX and
  PyTorch need not be equally noisy), with the Welch–Satterthwaite degrees of freedom. At 2-3
  repeats a bootstrap over two run medians cannot hold its 95 % (simulated A/A pairs gave 29 %
  false "faster" at n=2); Welch's t at 1 degree of freedom is wide, as it must be.
- **Three outcomes.** *faster*: the (1 - alpha) interval of the ratio excludes 1 (two-sided, so
  at most alpha false "faster" between identical configs). *equivalent*: two one-sided tests
  (TOST, Schuirmann 1987) against `verdict.band` (default ±2 %): the (1 - 2 alpha) interval lies
  inside [1/(1+band), 1+band]. Otherwise *cannot tell yet*, with the repeats per side that
  would decide at the noise seen (a normal-approximation sample size; "about"). Fewer than two
  runs on a side: *single sample, no verdict*, the ratio given as a ratio only.
- **Many configs.** A table's pairs form one family: Holm's step-down (Holm 1979) over their
  two-sided p-values keeps the chance of any false "faster" in the table at alpha; a pair's
  interval is printed at the level its Holm step used, so sentence and decision agree.
- **Stopping early (`run.repeats=auto`).** Rounds A B, B A, ... are looked at after each
  round from the second on, up to `max_repeats` rounds. Each look k spends the increment of the
  Lan–DeMets Pocock-type spending function alpha*(t) = alpha ln(1 + (e - 1) t), t = k /
  max_repeats (Lan & DeMets 1983, Biometrika 70:659): look k tests at alpha*(t_k) - alpha*(t_k-1).
  The increments sum to alpha, so by the union bound the chance of a false "faster" at any look
  is at most alpha whenever the loop stops (a conservative use of the spending function: the
  exact group-sequential boundaries would integrate the looks' joint distribution for a little
  more power). Pocock's shape spends alpha early, so a clear gap stops at 2-3 repeats. A
  pair's verdict is the first look at which it decided; rendered from the records, the same
  looks give the same sentence.
- **Caveats in the same sentence**: runs measured on a busy machine, and a gap smaller than the
  host's calibrated noise floor (`repro calibrate`).

    v = verdict([[...steps of run 1...], ...], [[...], ...])   # repro.verdict: lists of runs
    v.outcome, v.ratio, v.interval, v.more, v.text
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

ALPHA = 0.05
BAND = 0.02
MAX_REPEATS = 10
FASTER, EQUIVALENT, UNDECIDED, SINGLE = "faster", "equivalent", "cannot tell", "single sample"
DECIDED = (FASTER, EQUIVALENT)
MORE_CAP = 1000  # "more than 1000 repeats": a gap this small is not worth resolving here


@dataclass(frozen=True)
class Side:
    """One config's runs for a verdict: its name and each ok run's steady median (seconds), in
    the order the runs ran (round by round)."""

    name: str
    medians: tuple[float, ...]
    busy: int = 0  # of these runs, measured on a busy machine


@dataclass(frozen=True)
class Plan:
    """How a family of pairs is decided: one look at alpha (fixed repeats), or looks after every
    round up to `max_repeats` with alpha spent across them (`sequential`)."""

    band: float = BAND
    alpha: float = ALPHA
    sequential: bool = False
    max_repeats: int = MAX_REPEATS
    interleaved: bool = False


@dataclass(frozen=True)
class Verdict:
    """One pair's verdict. `a`/`b` are as given; `ratio` is b's time over a's (> 1: a is faster),
    `interval` its confidence interval at `level` (None: a single sample)."""

    outcome: str  # FASTER | EQUIVALENT | UNDECIDED | SINGLE
    a: str
    b: str
    ratio: float
    n_a: int
    n_b: int
    more: int | None = None  # about this many more repeats each would decide (UNDECIDED only)
    band: float = BAND
    what: str = ""
    interleaved: bool = False
    busy: int = 0  # runs of either side measured on a busy machine
    p: float | None = None  # two-sided p-value of "no difference" (Welch)
    family: int = 1  # pairs in the family its Holm step counted
    look: str = ""  # sequential: "auto, decided at 3 of at most 10 repeats" and the like
    floor: tuple[int, float] | None = None  # (repeats, gap) of the host's calibrated floor it falls below
    recomputed: bool = False  # a record written before this engine: the sentence is recomputed
    alpha: float = ALPHA  # the level it was decided at (a Holm step, a sequential look's share)
    d: float = 0.0  # log ratio, its standard error and Welch's degrees of freedom (the interval's)
    se: float = 0.0
    df: float = 0.0

    @property
    def level(self) -> float:
        """The confidence of `interval`: 1 - 2 alpha for an equivalence (TOST), else 1 - alpha."""
        return 1 - 2 * self.alpha if self.outcome == EQUIVALENT else 1 - self.alpha

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval of `ratio` at `level` (None: a single sample)."""
        if self.outcome == SINGLE:
            return None
        half = t_ppf(1 - (1 - self.level) / 2, self.df) * self.se if self.se else 0.0
        return math.exp(self.d - half), math.exp(self.d + half)

    @property
    def faster(self) -> str:
        return self.a if self.ratio >= 1 else self.b

    @property
    def slower(self) -> str:
        return self.b if self.ratio >= 1 else self.a

    @property
    def speedup(self) -> float:
        """The faster side's speed over the slower's (>= 1)."""
        return self.ratio if self.ratio >= 1 else 1 / self.ratio

    @property
    def ci(self) -> tuple[float, float] | None:
        """The interval of `speedup` (the faster over the slower)."""
        if self.interval is None:
            return None
        lo, hi = self.interval
        return (lo, hi) if self.ratio >= 1 else (1 / hi, 1 / lo)

    @property
    def decided(self) -> bool:
        return self.outcome in DECIDED

    @property
    def text(self) -> str:
        """The one sentence every view prints."""
        on = f" on {self.what}" if self.what else ""
        pct = lambda x: f"{100 * x:.3g} %"  # noqa: E731
        each = ("one run each" if self.n_a == self.n_b == 1 else f"{self.n_a} repeats each" if self.n_a == self.n_b
                else f"{self.n_a} and {self.n_b} repeats")
        if self.outcome == FASTER and self.faster == self.b:
            each = f"{self.n_b} repeats each" if self.n_a == self.n_b else f"{self.n_b} and {self.n_a} repeats"
        tail = each + (", interleaved" if self.interleaved else "") + (f", {self.look}" if self.look else "")
        if self.family > 1 and self.outcome != SINGLE:
            tail += f"; Holm-adjusted over {self.family} pairs"
        if self.busy:
            tail += f"; ⚠ {self.busy} of {self.n_a + self.n_b} runs measured on a busy machine"
        if self.floor:
            tail += f"; below this host's noise floor ({pct(self.floor[1])} at {self.floor[0]} repeats, repro calibrate)"
        if self.recomputed:
            tail += "; recomputed by this version's verdict engine"
        if self.outcome == SINGLE:
            return (f"{self.a} vs {self.b}{on}: single sample, no verdict (time ratio {self.b}/{self.a} "
                    f"{self.ratio:.2f}; {tail}; run.repeats=auto decides)")
        lo, hi = self.interval  # type: ignore[misc]
        if self.outcome == FASTER:
            clo, chi = self.ci  # type: ignore[misc]
            return (f"{self.faster} is {self.speedup:.2f}× faster than {self.slower}{on} "
                    f"({pct(self.level)} CI {clo:.2f}–{chi:.2f}, {tail})")
        if self.outcome == EQUIVALENT:
            return (f"{self.a} and {self.b} are equivalent within ±{pct(self.band)}{on} (time ratio "
                    f"{self.b}/{self.a} {self.ratio:.3f}, {pct(self.level)} CI {lo:.3f}–{hi:.3f}, {tail})")
        more = f"more than {MORE_CAP}" if self.more is None or self.more > MORE_CAP else f"about {self.more}"
        return (f"{self.a} vs {self.b}{on}: cannot tell yet: {more} more repeats each would decide at this "
                f"noise (time ratio {self.b}/{self.a} {self.ratio:.2f}, {pct(self.level)} CI {lo:.2f}–{hi:.2f}, {tail})")


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


def t_ppf(q: float, df: float) -> float:
    """The q-quantile of Student's t (bisection on `t_sf`: a rendered interval, not a hot loop)."""
    if q < 0.5:
        return -t_ppf(1 - q, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf(mid, df) > 1 - q else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def _logs(medians: Sequence[float]) -> list[float]:
    return [math.log(m) for m in medians if m and m > 0]


def _mean_var(x: list[float]) -> tuple[float, float]:
    m = sum(x) / len(x)
    return m, sum((v - m) ** 2 for v in x) / (len(x) - 1)


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(d, se, df): d = mean log b - mean log a (> 0: a is faster), its standard error and
    Welch–Satterthwaite degrees of freedom; both sides need two runs or more."""
    la, lb = _logs(a), _logs(b)
    (ma, va), (mb, vb) = _mean_var(la), _mean_var(lb)
    qa, qb = va / len(la), vb / len(lb)
    se2 = qa + qb
    if se2 <= 0:  # identical runs (a test's constants): no noise seen, the smallest df
        return mb - ma, 0.0, float(min(len(la), len(lb)) - 1)
    df = se2 ** 2 / ((qa ** 2 / (len(la) - 1) if qa else 0) + (qb ** 2 / (len(lb) - 1) if qb else 0))
    return mb - ma, math.sqrt(se2), df


def _p_two_sided(d: float, se: float, df: float) -> float:
    if se == 0:
        return 1.0 if d == 0 else 0.0
    return min(1.0, 2 * t_sf(abs(d) / se, df))


def _p_tost(d: float, se: float, df: float, band: float) -> float:
    """The larger p of the two one-sided tests that the true log ratio is above -log(1+band) and
    below +log(1+band) (Schuirmann's TOST): equivalence at alpha when <= alpha."""
    margin = math.log1p(band)
    if se == 0:
        return 0.0 if abs(d) < margin else 1.0
    return max(t_sf((d + margin) / se, df), t_sf((margin - d) / se, df))


def _more(d: float, se: float, df: float, n: int, band: float, alpha: float) -> int | None:
    """About how many more repeats per side would decide at this look's level, if the gap and the
    per-run noise stay as seen: the standard error shrinks as 1/sqrt(runs) and Welch's degrees of
    freedom grow with the runs; the first count at which the faster test or the equivalence
    test would pass (searched by doubling, then halving). None: not within MORE_CAP."""
    def decides(m: int) -> bool:
        se_m, df_m = se * math.sqrt(n / m), df * (m - 1) / (n - 1)
        return _p_two_sided(d, se_m, df_m) <= alpha or _p_tost(d, se_m, df_m, band) <= alpha
    hi = n + 1
    while not decides(hi):
        if hi > MORE_CAP + n:
            return None
        hi = n + 2 * (hi - n)
    lo = n  # does not decide (else there would be no "cannot tell")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi - n


def judge(a: Side, b: Side, band: float = BAND, alpha: float = ALPHA, what: str = "",
          interleaved: bool = False, family: int = 1, look: str = "") -> Verdict:
    """One pair at one level `alpha` (a Holm step or a look's spent increment already applied)."""
    la, lb = _logs(a.medians), _logs(b.medians)
    if not la or not lb:
        raise ValueError(f"{a.name if not la else b.name} has no ok run to compare")
    base = dict(a=a.name, b=b.name, n_a=len(la), n_b=len(lb), band=band, what=what, interleaved=interleaved,
                busy=a.busy + b.busy, family=family, look=look, alpha=alpha)
    if min(len(la), len(lb)) < 2:
        return Verdict(SINGLE, ratio=math.exp(sum(lb) / len(lb) - sum(la) / len(la)), **base)
    d, se, df = welch(a.medians, b.medians)
    p = _p_two_sided(d, se, df)
    if p <= alpha:
        outcome, more = FASTER, None
    elif _p_tost(d, se, df, band) <= alpha:
        outcome, more = EQUIVALENT, None
    else:
        outcome, more = UNDECIDED, _more(d, se, df, min(len(la), len(lb)), band, alpha)
    return Verdict(outcome, ratio=math.exp(d), p=p, more=more, d=d, se=se, df=df, **base)


def noise(sides: Sequence[Sequence[float]]) -> float:
    """Run-to-run noise: the pooled standard deviation of log run medians within each side (a
    fraction: 0.03 is 3 %), from every side with two runs or more."""
    logs = [_logs(s) for s in sides if len(_logs(s)) >= 2]
    dof = sum(len(x) - 1 for x in logs)
    return math.sqrt(sum(_mean_var(x)[1] * (len(x) - 1) for x in logs) / dof) if dof else float("nan")


def resolvable_gap(sigma: float, repeats: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """The smallest gap (0.05: 5 %) called "faster" with probability `power` at run-to-run noise
    `sigma` and `repeats` runs per side (two-sided t, 2 repeats - 2 degrees of freedom)."""
    df = 2 * repeats - 2
    return math.expm1((t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * sigma * math.sqrt(2 / repeats))


def spent(look: int, max_repeats: int, alpha: float = ALPHA) -> float:
    """The alpha a sequential look after `look` rounds may use: the increment of the Lan–DeMets
    Pocock-type spending function over the previous look (the first look is after round 2)."""
    def total(k: int) -> float:
        return alpha * math.log1p((math.e - 1) * min(k, max_repeats) / max_repeats)
    return total(look) - (total(look - 1) if look > 2 else 0.0)


def _holm(pairs: list[tuple[Side, Side, str]], alpha: float, band: float, interleaved: bool,
          look: str = "") -> list[Verdict]:
    """Each pair judged at its Holm step's level: in order of p, step i uses alpha / (m - i),
    until a pair fails to be called faster; every later pair uses that last level."""
    m = len(pairs)
    first = [judge(a, b, band, alpha, what, interleaved) for a, b, what in pairs]
    order = sorted(range(m), key=lambda i: (first[i].p if first[i].p is not None else 2.0))
    out: list[Verdict | None] = [None] * m
    step_alpha = alpha / m
    for rank, i in enumerate(order):
        step_alpha = alpha / (m - rank)
        a, b, what = pairs[i]
        v = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look)
        out[i] = v
        if v.outcome != FASTER:  # Holm stops rejecting here: the rest keep this level
            for j in order[rank + 1:]:
                a, b, what = pairs[j]
                out[j] = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look)
            break
    return out  # type: ignore[return-value]


def decide_family(pairs: list[tuple[Side, Side, str]], plan: Plan = Plan()) -> list[Verdict]:
    """The verdicts of a table's pairs ((side a, side b, what they share)), decided together.

    Fixed repeats: one look, Holm over the pairs at `plan.alpha`. Sequential (`run.repeats=auto`):
    a look after each round k = 2, 3, ... (each side's first k runs) at the spent increment of
    alpha, Holm over the pairs inside each look; a pair keeps the first look that decided it."""
    if not pairs:
        return []
    if not plan.sequential:
        return _holm(pairs, plan.alpha, plan.band, plan.interleaved)
    rounds = max(min(len(a.medians), len(b.medians)) for a, b, _ in pairs)
    final: list[Verdict | None] = [None] * len(pairs)
    last: list[Verdict] = []
    for k in range(2, max(rounds, 2) + 1):
        cut = [(replace(a, medians=a.medians[:k]), replace(b, medians=b.medians[:k]), what) for a, b, what in pairs]
        last = _holm(cut, spent(k, plan.max_repeats, plan.alpha), plan.band, plan.interleaved)
        for i, v in enumerate(last):
            if final[i] is None and v.decided:
                final[i] = replace(v, look=f"auto: decided after {k} rounds")
    n = rounds
    why = (f"auto: stopped at verdict.max_repeats={plan.max_repeats}" if n >= plan.max_repeats
           else f"auto: undecided after {n} rounds")
    return [f if f is not None else replace(v, look=why) for f, v in zip(final, last)]


def verdict(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], band: float = BAND,
            names: tuple[str, str] = ("A", "B"), alpha: float = ALPHA) -> Verdict:
    """`repro.verdict`: two configs' runs, each run a list of its step times in seconds (the
    steady steps: leave the compile step out), judged as the views judge recorded runs."""
    from statistics import median

    sides = [Side(name, tuple(float(median(run)) for run in runs if len(run))) for name, runs in zip(names, (a, b))]
    for side, runs in zip(sides, (a, b)):
        if not side.medians:
            raise ValueError(f"repro.verdict: {side.name} has no run with step times (give a list of runs, "
                             "each a list of step times in seconds)")
    if not 0 < band < 1:
        raise ValueError(f"repro.verdict: band={band} must be between 0 and 1 (0.02: ±2 %)")
    return judge(sides[0], sides[1], band, alpha)
