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
  taken in log space; the ratio of two configs is exp(mean log ratio), the geometric-mean
  ratio, with a Student t interval.
- **Rounds are analysed in pairs.** A sweep runs each config once per round (`repeat.index`),
  in a fresh random order. Whatever the round shares (the machine's drift, a neighbour's load,
  the thermal state) moves both runs of a round alike, so the within-round log ratio
  d_i = log b_i - log a_i cancels it: where every run of both sides is in a complete round (one
  ok run of each config per round), the interval is a paired t on the d_i (df = rounds - 1),
  and the sentence says "paired over N rounds". Where rounds are incomplete (a failed run, runs
  from different sweeps), the run medians are compared unpaired by Welch's t (unequal variances:
  JAX and PyTorch need not be equally noisy; Welch–Satterthwaite degrees of freedom), and the
  sentence says "Welch, rounds incomplete". At 2-3 repeats a bootstrap over two run medians
  cannot hold its 95 % (simulated A/A pairs gave 29 % false "faster" at n=2); a t at 1-2 degrees of freedom is
  wide, as it must be.
- **Three outcomes.** *faster*: the (1 - alpha) interval of the ratio excludes 1 (two-sided, so
  at most alpha false "faster" between identical configs). *equivalent*: two one-sided tests
  (TOST, Schuirmann 1987) against `verdict.band` (default ±2 %): the (1 - 2 alpha) interval lies
  inside [1/(1+band), 1+band]. Otherwise *cannot tell yet*, with the repeats per side that
  would decide at the noise seen (a normal-approximation sample size; "about"). Fewer than two
  runs on a side: *single sample, no verdict*, the ratio given as a ratio only.
- **No spread, no verdict.** Identical medians (or, paired, the same ratio in every round) give
  a standard error of zero: no noise was seen, not an infinitely precise gap. Such a pair is
  *cannot tell* ("identical medians: no spread to judge"), never "faster" nor "equivalent" with
  an interval of zero width: duplicated records or a test's constants are not a measurement, and
  `run.repeats=auto` keeps running rounds on a pair that is not decided. (A spread below one part
  in 10^9 counts as none: it is the rounding of equal numbers, below any timer's resolution.)
- **Many configs.** A table's pairs form one family: Holm's step-down (Holm 1979) over their
  two-sided p-values keeps the chance of any false "faster" in the table at alpha; a pair's
  interval is printed at the level its Holm step used, so sentence and decision agree.
- **Stopping early (`run.repeats=auto`): a few planned looks.** The loop looks only after
  rounds 3 and 5, and 7 and 10 where `verdict.max_repeats` allows; `verdict.max_repeats` itself
  is always the last look (`looks`). Look k spends the increment of the power-family spending
  function alpha*(t) = alpha t^2 at the information fraction t = rounds / last look's rounds
  (Lan & DeMets 1983, Biometrika 70:659; Kim & DeMets 1987, Biometrics 43:857; Jennison &
  Turnbull 2000, "Group Sequential Methods with Applications to Clinical Trials", §7.2): a shape
  between Pocock's (rho = 1, spends early) and O'Brien–Fleming's (rho = 3, keeps alpha for the
  last look). At alpha = 0.05: two looks (3, 5) test at 0.018 and 0.032; four looks (3, 5, 7,
  10) at 0.0045, 0.008, 0.012 and 0.0255. Simulated (benchmarks/verdict_calibration.py), rho = 2
  decided a 5 % gap by round 5 more often than rho = 3 and lost less power at the last look
  than rho = 1. The increments sum to alpha, so by the union bound the chance of a false
  "faster" at any look is at most alpha whenever the loop stops (conservative: exact
  group-sequential boundaries would integrate the looks' joint distribution for a little more
  power). Few looks, because every look spends;
  the loop's rounds between looks cost runs but no alpha. A pair's verdict is the first
  planned look at which it decided; rendered from the records, the same looks give the same
  sentence. Fixed `run.repeats=N` is one look at alpha.
- **Caveats in the same sentence**: runs measured on a busy machine, and a gap smaller than the
  host's calibrated noise floor (`repro calibrate`).

    v = verdict([[...steps of run 1...], ...], [[...], ...])   # repro.verdict: lists of runs
    v = verdict(a, b, paired=True)                             # a[i], b[i]: round i's runs
    v.outcome, v.ratio, v.interval, v.more, v.text
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Sequence

ALPHA = 0.05
BAND = 0.02
MAX_REPEATS = 10
FASTER, EQUIVALENT, UNDECIDED, SINGLE = "faster", "equivalent", "cannot tell", "single sample"
UNFAIR = "refused"  # not judged: the sides were measured under different conditions (report/comparison.py)
DECIDED = (FASTER, EQUIVALENT)
SHORTEST_S, LONGEST_S = 1e-12, 1e9  # what repro.verdict takes as a step time (a picosecond to 30 years)
MORE_CAP = 1000  # "more than 1000 repeats": a gap this small is not worth resolving here


@dataclass(frozen=True)
class Side:
    """One config's runs for a verdict: its name and each ok run's steady median (seconds), in
    the order the runs ran (round by round), and, where known, the round each median belongs to
    (`rounds[i]`: any hashable key, e.g. (sweep family, repeat.index)): pairs of rounds are
    matched by it."""

    name: str
    medians: tuple[float, ...]
    busy: int = 0  # of these runs, measured on a busy machine
    rounds: tuple | None = None  # the round of each median (None: not known, so never paired)
    busy_at: tuple[bool, ...] | None = None  # whether each median's run was busy (a look counts its own)

    def only(self, keep: Sequence[int]) -> "Side":
        """The side with only the medians at `keep` (a look's first rounds), its busy count theirs."""
        pick = lambda xs: None if xs is None or len(xs) != len(self.medians) else tuple(xs[i] for i in keep)  # noqa: E731
        flags = pick(self.busy_at)
        return replace(self, medians=tuple(self.medians[i] for i in keep), rounds=pick(self.rounds), busy_at=flags,
                       busy=sum(flags) if flags is not None else self.busy)


@dataclass(frozen=True)
class Plan:
    """How a family of pairs is decided: one look at alpha (fixed repeats), or the planned looks
    (`looks(max_repeats)`) with alpha spent across them (`sequential`)."""

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
    p: float | None = None  # two-sided p-value of "no difference" (paired t or Welch)
    family: int = 1  # pairs in the family its Holm step counted
    look: str = ""  # sequential: "auto: decided after 5 rounds (look 2 of 4)" and the like
    floor: tuple[int, float] | None = None  # (repeats, gap) of the host's calibrated floor it falls below
    recomputed: bool = False  # a record written before this engine: the sentence is recomputed
    alpha: float = ALPHA  # the level it was decided at (a Holm step, a sequential look's share)
    d: float = 0.0  # log ratio, its standard error and the t's degrees of freedom (the interval's)
    se: float = 0.0
    df: float = 0.0
    paired: int = 0  # rounds the paired t used (0: unpaired, Welch)
    unpaired: str = ""  # why Welch where rounds were given: "rounds incomplete"
    flat: str = ""  # no spread to judge: what was identical ("identical medians", ...)
    mode: str = ""  # the determinism mode both sides ran in ("in deterministic mode (...)"; "" where it is the axis)
    refused: str = ""  # UNFAIR only: why the sides are not compared
    axis: str = ""  # the key the two sides differ in (report/comparison.py's COMPARED)
    rows: tuple = field(default=(), compare=False, repr=False)  # the two comparison rows (a's, b's)

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
        return _exp(self.d - half), _exp(self.d + half)

    @property
    def faster(self) -> str:
        return self.a if self.ratio >= 1 else self.b

    @property
    def slower(self) -> str:
        return self.b if self.ratio >= 1 else self.a

    @property
    def speedup(self) -> float:
        """The faster side's speed over the slower's (>= 1)."""
        return self.ratio if self.ratio >= 1 else _inv(self.ratio)

    @property
    def ci(self) -> tuple[float, float] | None:
        """The interval of `speedup` (the faster over the slower)."""
        if self.interval is None:
            return None
        lo, hi = self.interval
        return (lo, hi) if self.ratio >= 1 else (_inv(hi), _inv(lo))

    @property
    def decided(self) -> bool:
        return self.outcome in DECIDED

    @property
    def analysis(self) -> str:
        """How the interval was made, as the sentence says it ("" where the caller gave no rounds)."""
        if self.paired:
            return f"paired over {self.paired} rounds"
        return f"Welch, {self.unpaired}" if self.unpaired else ""

    @property
    def text(self) -> str:
        """The one sentence every view prints."""
        on = (f" on {self.what}" if self.what else "") + (f" {self.mode}" if self.mode else "")
        pct = lambda x: f"{100 * x:.3g} %"  # noqa: E731
        each = ("one run each" if self.n_a == self.n_b == 1 else f"{self.n_a} repeats each" if self.n_a == self.n_b
                else f"{self.n_a} and {self.n_b} repeats")
        if self.outcome == FASTER and self.faster == self.b:
            each = f"{self.n_b} repeats each" if self.n_a == self.n_b else f"{self.n_b} and {self.n_a} repeats"
        tail = each + (", interleaved" if self.interleaved else "")
        if self.outcome != SINGLE and self.analysis:
            tail += f", {self.analysis}"
        tail += f", {self.look}" if self.look else ""
        if self.family > 1 and self.outcome != SINGLE:
            tail += f"; Holm-adjusted over {self.family} pairs"
        if self.busy:
            tail += f"; ⚠ {self.busy} of {self.n_a + self.n_b} runs measured on a busy machine"
        if self.floor:
            tail += f"; below this host's noise floor ({pct(self.floor[1])} at {self.floor[0]} repeats, repro calibrate)"
        if self.recomputed:
            tail += "; recomputed by this version's verdict engine"
        if self.outcome == UNFAIR:
            return f"{self.a} vs {self.b}{on}: no verdict, an unfair pair: {self.refused}"
        if self.outcome == SINGLE:
            return (f"{self.a} vs {self.b}{on}: single sample, no verdict (time ratio {self.b}/{self.a} "
                    f"{self.ratio:.2f}; {tail}; run.repeats=auto decides)")
        if self.flat:
            return (f"{self.a} vs {self.b}{on}: cannot tell yet: {self.flat}: no spread to judge (time ratio "
                    f"{self.b}/{self.a} {self.ratio:.2f}, {tail})")
        lo, hi = self.interval  # type: ignore[misc]
        if self.outcome == FASTER:
            clo, chi = self.ci  # type: ignore[misc]
            return (f"{self.faster} is {self.speedup:.2f}× faster than {self.slower}{on} "
                    f"({pct(self.level)} CI {bound_text(clo)}–{bound_text(chi)}, {tail})")
        if self.outcome == EQUIVALENT:
            return (f"{self.a} and {self.b} are equivalent within ±{pct(self.band)}{on} (time ratio "
                    f"{self.b}/{self.a} {self.ratio:.3f}, {pct(self.level)} CI {bound_text(lo, 3)}–{bound_text(hi, 3)}, {tail})")
        more = f"more than {MORE_CAP}" if self.more is None or self.more > MORE_CAP else f"about {self.more}"
        return (f"{self.a} vs {self.b}{on}: cannot tell yet: {more} more repeats each would decide at this "
                f"noise (time ratio {self.b}/{self.a} {self.ratio:.2f}, {pct(self.level)} CI {bound_text(lo)}–{bound_text(hi)}, {tail})")


def bound_text(x: float, digits: int = 2) -> str:
    """An interval's end as a person reads it: past 1000 (a t at one or two degrees of freedom, Holm's
    share of alpha) its digits say nothing, and 300-digit numbers broke the terminal's lines."""
    return f"{x:.{digits}f}" if x <= MORE_CAP else f"> {MORE_CAP}"


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
    per-run noise stay as seen: the standard error shrinks as 1/sqrt(runs) and the degrees of
    freedom grow with the runs (paired: rounds - 1; Welch: in proportion); the first count at
    which the faster test or the equivalence test would pass (searched by doubling, then
    halving). None: not within MORE_CAP."""
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


def _usable(side: Side) -> tuple[list[float], list | None]:
    """A side's usable medians (finite, positive) and their rounds (None: rounds not known)."""
    keys = side.rounds if side.rounds is not None and len(side.rounds) == len(side.medians) else None
    keep = [i for i, m in enumerate(side.medians) if _ok(m)]
    return [side.medians[i] for i in keep], (None if keys is None else [keys[i] for i in keep])


def rounds_of(a: Side, b: Side) -> list[tuple[float, float]] | None:
    """The complete rounds of a pair, (a's median, b's median) in a's order; None where the runs
    do not form complete rounds (a round key unknown, or missing or repeated on a side)."""
    (ma, ka), (mb, kb) = _usable(a), _usable(b)
    if ka is None or kb is None or not ka or None in ka or None in kb:
        return None
    if len(set(ka)) != len(ka) or len(set(kb)) != len(kb) or set(ka) != set(kb):
        return None
    of_b = dict(zip(kb, mb))
    return [(x, of_b[k]) for x, k in zip(ma, ka)]


def judge(a: Side, b: Side, band: float = BAND, alpha: float = ALPHA, what: str = "",
          interleaved: bool = False, family: int = 1, look: str = "", estimate_more: bool = True) -> Verdict:
    """One pair at one level `alpha` (a Holm step or a look's spent increment already applied):
    paired over its rounds where both sides carry rounds and they are complete, else Welch.
    `estimate_more=False` leaves `more` None (a look whose "cannot tell" is not shown)."""
    la, lb = _logs(a.medians), _logs(b.medians)
    if not la or not lb:
        raise ValueError(f"{a.name if not la else b.name} has no ok run to compare")
    pairs = rounds_of(a, b)
    given = a.rounds is not None and b.rounds is not None
    base = dict(a=a.name, b=b.name, n_a=len(la), n_b=len(lb), band=band, what=what, interleaved=interleaved,
                busy=a.busy + b.busy, family=family, look=look, alpha=alpha,
                unpaired="" if pairs is not None or not given else "rounds incomplete")
    if min(len(la), len(lb)) < 2:
        return Verdict(SINGLE, ratio=_exp(sum(lb) / len(lb) - sum(la) / len(la)), **base)
    if pairs is not None:
        d, se, df = paired_t([x for x, _ in pairs], [y for _, y in pairs])
        base["paired"] = len(pairs)
    else:
        d, se, df = welch(a.medians, b.medians)
    if se == 0:  # no spread: never a decision on an interval of zero width
        same = _flat(la + lb) or (pairs is not None and abs(d) <= FLAT)
        flat = "identical medians" if same else "the same ratio in every round" if pairs is not None else \
            "identical medians within each side"
        return Verdict(UNDECIDED, ratio=_exp(d), d=d, df=df, flat=flat, **base)
    p = _p_two_sided(d, se, df)
    if p <= alpha:
        outcome, more = FASTER, None
    elif _p_tost(d, se, df, band) <= alpha:
        outcome, more = EQUIVALENT, None
    else:
        outcome, more = UNDECIDED, _more(d, se, df, min(len(la), len(lb)), band, alpha) if estimate_more else None
    return Verdict(outcome, ratio=_exp(d), p=p, more=more, d=d, se=se, df=df, **base)


def noise(sides: Sequence[Sequence[float]]) -> float:
    """Run-to-run noise: the pooled standard deviation of log run medians within each side (a
    fraction: 0.03 is 3 %), from every side with two runs or more."""
    logs = [_logs(s) for s in sides if len(_logs(s)) >= 2]
    dof = sum(len(x) - 1 for x in logs)
    return math.sqrt(sum(_mean_var(x)[1] * (len(x) - 1) for x in logs) / dof) if dof else float("nan")


def resolvable_gap(sigma: float, repeats: int, alpha: float = ALPHA, power: float = 0.8,
                   paired: bool = False) -> float:
    """The smallest gap (0.05: 5 %) called "faster" with probability `power` at `repeats` runs per
    side: unpaired, at run-to-run noise `sigma` (two-sided Welch-like t, 2 repeats - 2 degrees of
    freedom); `paired`, at `sigma` the SD of the within-round log ratio and `repeats` rounds
    (rounds - 1 degrees of freedom)."""
    if paired:
        df = repeats - 1
        return math.expm1((t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * sigma / math.sqrt(repeats))
    df = 2 * repeats - 2
    return math.expm1((t_ppf(1 - alpha / 2, df) + t_ppf(power, df)) * sigma * math.sqrt(2 / repeats))


PLANNED_LOOKS = (3, 5, 7, 10)
SPENDING_RHO = 2  # alpha*(t) = alpha t^rho: the power family (1: Pocock-like, 3: O'Brien–Fleming-like)


def looks(max_repeats: int) -> tuple[int, ...]:
    """The rounds after which `run.repeats=auto` looks: 3 and 5, and 7 and 10 where
    `max_repeats` allows, and `max_repeats` itself as the last (2: one look after round 2)."""
    if max_repeats < 2:
        raise ValueError(f"max_repeats={max_repeats} must be at least 2 (a verdict needs two rounds)")
    return tuple(k for k in PLANNED_LOOKS if k < max_repeats) + (max_repeats,)


def spending(max_repeats: int, alpha: float = ALPHA) -> dict[int, float]:
    """The alpha each planned look tests at: the increments of alpha t^2 over the looks, t the
    rounds of a look over the last look's (Kim & DeMets 1987's power family of Lan–DeMets
    spending functions); they sum to alpha. {3: 0.0045, 5: 0.008, 7: 0.012, 10: 0.0255} at
    max_repeats=10, {3: 0.018, 5: 0.032} at 5."""
    planned = looks(max_repeats)
    total = lambda k: alpha * (k / planned[-1]) ** SPENDING_RHO  # noqa: E731
    return {k: total(k) - (total(prev) if prev else 0.0) for prev, k in zip((0,) + planned, planned)}


def spent(look: int, max_repeats: int, alpha: float = ALPHA) -> float:
    """The alpha a sequential look after `look` rounds may use: its share of `spending` at a
    planned look, 0 after any other round (the loop runs it but does not look)."""
    return spending(max_repeats, alpha).get(look, 0.0)


def _holm(pairs: list[tuple[Side, Side, str]], alpha: float, band: float, interleaved: bool,
          look: str = "", estimate_more: bool = True) -> list[Verdict]:
    """Each pair judged at its Holm step's level: in order of p, step i uses alpha / (m - i),
    until a pair fails to be called faster; every later pair uses that last level."""
    m = len(pairs)
    if m == 1:
        a, b, what = pairs[0]
        return [judge(a, b, band, alpha, what, interleaved, look=look, estimate_more=estimate_more)]
    first = [judge(a, b, band, alpha, what, interleaved, estimate_more=False) for a, b, what in pairs]
    order = sorted(range(m), key=lambda i: (first[i].p if first[i].p is not None else 2.0))
    out: list[Verdict | None] = [None] * m
    step_alpha = alpha / m
    for rank, i in enumerate(order):
        step_alpha = alpha / (m - rank)
        a, b, what = pairs[i]
        v = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look, estimate_more=estimate_more)
        out[i] = v
        if v.outcome != FASTER:  # Holm stops rejecting here: the rest keep this level
            for j in order[rank + 1:]:
                a, b, what = pairs[j]
                out[j] = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look,
                               estimate_more=estimate_more)
            break
    return out  # type: ignore[return-value]


def first_rounds(a: Side, b: Side, k: int) -> tuple[Side, Side]:
    """A pair as it stood after its first `k` rounds: its first k complete rounds where it pairs,
    else each side's first k runs."""
    pairs = rounds_of(a, b)
    if pairs is None:
        return a.only(range(min(k, len(a.medians)))), b.only(range(min(k, len(b.medians))))
    (_, ka), (_, kb) = _usable(a), _usable(b)
    keep = set(ka[:k])  # type: ignore[index]
    cut = lambda s: [i for i, key in enumerate(s.rounds) if key in keep and _ok(s.medians[i])]  # noqa: E731
    return a.only(cut(a)), b.only(cut(b))


def _rounds(a: Side, b: Side) -> int:
    pairs = rounds_of(a, b)
    return len(pairs) if pairs is not None else min(len(_logs(a.medians)), len(_logs(b.medians)))


def decide_family(pairs: list[tuple[Side, Side, str]], plan: Plan = Plan()) -> list[Verdict]:
    """The verdicts of a table's pairs ((side a, side b, what they share)), decided together.

    Fixed repeats: one look, Holm over the pairs at `plan.alpha`. Sequential (`run.repeats=auto`):
    the planned looks (`looks`, `spending`), each on the pairs' first k rounds at its spent
    alpha, Holm over the pairs inside each look; a pair keeps the first look that decided it.
    An undecided pair is shown on all its rounds at the level of the look it waits for (or the
    last), and never decided between looks."""
    if not pairs:
        return []
    if not plan.sequential:
        return _holm(pairs, plan.alpha, plan.band, plan.interleaved)
    planned, spend = looks(plan.max_repeats), spending(plan.max_repeats, plan.alpha)
    rounds = max(_rounds(a, b) for a, b, _ in pairs)
    final: list[Verdict | None] = [None] * len(pairs)
    for n, k in enumerate(planned, 1):
        if k > rounds or all(f is not None for f in final):
            break
        cut = [(*first_rounds(a, b, k), what) for a, b, what in pairs]
        for i, v in enumerate(_holm(cut, spend[k], plan.band, plan.interleaved, estimate_more=False)):
            if final[i] is None and v.decided:
                final[i] = replace(v, look=f"auto: decided after {k} rounds (look {n} of {len(planned)})")
    waiting = next((k for k in planned if k > rounds), None)
    if waiting is None or rounds >= plan.max_repeats:
        why = f"auto: stopped at verdict.max_repeats={plan.max_repeats}"
    else:
        why = f"auto: undecided after {rounds} rounds (next look after {waiting})"
    if all(f is not None for f in final):
        return final  # type: ignore[return-value]
    now = _holm(pairs, spend[waiting or planned[-1]], plan.band, plan.interleaved)
    out = []
    for f, v in zip(final, now):
        if f is not None:
            out.append(f)
        elif v.decided:  # between looks: not a decision, the next look may make it one
            out.append(replace(v, outcome=UNDECIDED, more=max(1, (waiting or rounds) - rounds), look=why))
        elif waiting and v.more is not None:  # a decision comes at a look, not before
            out.append(replace(v, more=max(v.more, waiting - rounds), look=why))
        else:
            out.append(replace(v, look=why))
    return out


def _checked(runs, name: str) -> list[list[float]]:
    """A side's runs as lists of step times, or a ValueError naming the run and the bad time."""
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__len__"):
        raise ValueError(f"repro.verdict: {name} must be a list of runs, each a list of step times in seconds")
    out = []
    for i, run in enumerate(runs):
        if isinstance(run, (str, bytes)) or not hasattr(run, "__iter__"):
            raise ValueError(f"repro.verdict: {name} run {i} must be a list of step times in seconds, not {run!r:.40}")
        times = list(run)
        if not times:
            raise ValueError(f"repro.verdict: {name} run {i} has no step times")
        for j, t in enumerate(times):
            if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t <= 0:
                raise ValueError(f"repro.verdict: {name} run {i} step {j}: {t!r:.40} is not a finite positive "
                                 "time in seconds")
            if not SHORTEST_S <= t <= LONGEST_S:  # their ratios would overflow to inf or 0
                raise ValueError(f"repro.verdict: {name} run {i} step {j}: {t!r:.40} s is outside "
                                 f"{SHORTEST_S:g}–{LONGEST_S:g} s, no step time a clock reads")
        out.append([float(t) for t in times])
    return out


def verdict(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], band: float = BAND,
            names: tuple[str, str] = ("A", "B"), alpha: float = ALPHA, paired: bool = False) -> Verdict:
    """`repro.verdict`: two configs' runs, each run a list of its step times in seconds (the
    steady steps: leave the compile step out), judged as the views judge recorded runs.
    `paired=True`: a[i] and b[i] ran in the same round i (a paired t on their log ratios);
    else unpaired (Welch). Times that are not finite and positive, an empty run, unequal rounds
    when paired, `band` outside (0, 1) and `alpha` outside (0, 0.5) raise ValueError."""
    from statistics import median

    for key, value, top, why in (("band", band, 1, "0.02: ±2 %"),
                                 ("alpha", alpha, 0.5, "0.05: 95 % confidence; the equivalence test reads a "
                                                       "1 - 2 alpha interval, empty from 0.5 on")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < top:
            raise ValueError(f"repro.verdict: {key}={value!r} must be between 0 and {top} (exclusive; {why})")
    runs = [_checked(x, name) for x, name in zip((a, b), names)]
    for name, side in zip(names, runs):
        if not side:
            raise ValueError(f"repro.verdict: {name} has no run with step times (give a list of runs, "
                             "each a list of step times in seconds)")
    if paired and len(runs[0]) != len(runs[1]):
        raise ValueError(f"repro.verdict: paired=True needs one run of each side per round: {names[0]} has "
                         f"{len(runs[0])} runs, {names[1]} {len(runs[1])} (or give paired=False)")
    sides = [Side(name, tuple(float(median(run)) for run in side), rounds=tuple(range(len(side))) if paired else None)
             for name, side in zip(names, runs)]
    return judge(sides[0], sides[1], band, alpha)
