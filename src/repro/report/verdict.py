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
- **The statistic is a seam** (report/statistic.py): the estimate, its standard error, its degrees
  of freedom and its calibrated null come from the registered statistic `verdict.statistic` names:
  `paired-t` (the paired t; Welch), `trimmed` (the trimmed paired t of the next bullet; Yuen) and
  `adaptive`, the default (issue 61): the trim chosen from each sweep's own tail weight (Hogg's Q),
  0, trim / 2 or trim of each end from 7 rounds, the paired t below, the whole procedure's null
  fitted under normal noise. The trimmed t kept the A/A rate where one process in ten is slow and
  paid for it in clean noise (25 % power at 5 rounds and 70 % at 10 for a 5 % gap where the paired
  t has 49 % and 92 %); the adaptive statistic keeps the paired t's 49 % and 91 % there and 59 % at
  10 rounds with slow processes (the paired t 23 %, the trimmed t 63 %), A/A at most 4.3 % there
  (benchmarks/verdict_calibration.py, 20,000 sweeps a cell). The sentence names the estimator.
- **A minority of slow processes is trimmed** (`verdict.trim`, default 0.2; `verdict.statistic=trimmed`). On a shared VM about
  one process in ten runs 50-75 % slower for its whole life, and a paired t takes its variance
  from those few rounds (issue 48: power 22 % for a 5 % gap at 10 rounds). The estimate is the
  trimmed mean of the within-round log ratios: k = floor(trim x rounds) rounds are dropped from
  each end (never so many that fewer than two remain), its standard error from the winsorized
  variance, (n - 1) s_w^2 / (h (h - 1)) with h = n - 2k kept (Tukey & McLaughlin 1963, Sankhya
  A 25:331, the one-sample trimmed t; Yuen 1974, Biometrika 61:165, for two samples: the unpaired
  fallback is Yuen's trimmed Welch t on the log run medians; Wilcox 2012, "Introduction to
  Robust Estimation and Hypothesis Testing", 3rd ed., §4.5 and §5.3). At small n that t is
  liberal even under normal noise (simulated: 7 % A/A at 5 rounds, 6.5 % at 10; 6.0 % at 5 rounds
  in the issue's outlier model), so its null distribution at this n and k is simulated under
  normal noise (seeded, `_null_fit`) and a scaled t, c t_nu, is fitted to it at its 95 % and
  99.5 % quantiles: the interval is d +- c t_nu se, and under normal noise the test holds its
  level from alpha 0.05 down to the looks' shares. Slow processes make the null lighter-tailed
  than that, not heavier (A/A 3-4 % in the outlier model). Where no round is trimmed (k = 0:
  fewer than 5 rounds at 0.2, or `verdict.trim=0`) it is exactly the paired t and Welch of the
  bullet above. An exact sign-flip test was not chosen: its smallest two-sided p is 2 / 2^n,
  0.0625 at 5 rounds, so it could never decide at the looks after 3, 5 or 7 rounds. The sentence
  names the estimator ("trimmed paired t over 10 rounds, 20 % trimmed").
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
- **Nodes are a level of their own.** Under a cluster launcher a round runs on one node
  (loop/submitit_rounds.py), so its pair never spans nodes and the node's own speed cancels in
  d_i; but rounds may run on several nodes, and whatever a node does to the ratio (its CPU
  stepping, its memory, its neighbours) is shared by every round on it. Where a pair's rounds
  ran on two nodes or more, the d_i are read as rounds within nodes (one-way random effects):
  the between-node variance component is estimated by the method of moments (the ANOVA
  estimator, sigma_b^2 = max(0, (MSB - MSW) / n0); Searle, Casella & McCulloch 1992, "Variance
  Components", §3.5) and added to the estimate's variance as sigma_b^2 sum n_j^2 / N^2 (n_j the
  rounds on node j, N all rounds), with Satterthwaite's degrees of freedom between the two
  parts (nodes - 1 for the node part). Where no node-to-node spread is seen (sigma_b^2 = 0) the
  interval is the rounds' alone; the sentence says which ("rounds on 2 nodes, node-to-node
  spread 3.1 % counted").
- **Caveats in the same sentence**: runs measured on a busy machine, and a gap smaller than the
  host's calibrated noise floor (`repro calibrate`).

    v = verdict([[...steps of run 1...], ...], [[...], ...])   # repro.verdict: lists of runs
    v = verdict(a, b, paired=True)                             # a[i], b[i]: round i's runs
    v = verdict(a, b, paired=True, trim=0)                     # the plain paired t, nothing trimmed
    v = verdict(a, b, paired=True, statistic="trimmed")        # always verdict.trim of each end
    v.outcome, v.ratio, v.interval, v.more, v.text
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Sequence

from repro.config.schema import VerdictConfig
from repro.ledger.record import view
from repro.report import statistic as S
# the statistics live in report/statistic.py; these names are the engine's public ones too
from repro.report.statistic import (ALPHA, FLAT, RESAMPLE_MIN, STATISTIC, TRIM, TRIM_MAX,  # noqa: F401
                                    _exp, _flat, _inv, _logs, _mean_var, _null_fit, _ok, _trimmed_rows, f_sf,
                                    paired_t, resampled_gap, t_ppf, t_sf, trim_count, trimmed_paired, welch, yuen)

BAND = VerdictConfig.band  # verdict.band: the defaults are config/schema.py's, written there alone
MAX_REPEATS = VerdictConfig.max_repeats
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
    nodes: tuple | None = None  # the node each median's run was measured on (None: not known, one level)

    def only(self, keep: Sequence[int]) -> "Side":
        """The side with only the medians at `keep` (a look's first rounds), its busy count theirs."""
        pick = lambda xs: None if xs is None or len(xs) != len(self.medians) else tuple(xs[i] for i in keep)  # noqa: E731
        flags = pick(self.busy_at)
        return replace(self, medians=tuple(self.medians[i] for i in keep), rounds=pick(self.rounds), busy_at=flags,
                       busy=sum(flags) if flags is not None else self.busy, nodes=pick(self.nodes))


@dataclass(frozen=True)
class Plan:
    """How a family of pairs is decided: one look at alpha (fixed repeats), or the planned looks
    (`looks(max_repeats)`) with alpha spent across them (`sequential`)."""

    band: float = BAND
    alpha: float = ALPHA
    sequential: bool = False
    max_repeats: int = MAX_REPEATS
    interleaved: bool = False
    trim: float = TRIM
    statistic: str = STATISTIC  # verdict.statistic: the registered statistic (report/statistic.py)

    @classmethod
    def of(cls, records) -> "Plan":
        """How these records' pairs are decided (report/comparison.py's tables, report/noise.py's
        trials): the `verdict` config of the first record that holds one (older records: the schema's
        defaults), and the planned looks of run.repeats=auto where they ran so (the first auto plan's
        `max`, else verdict.max_repeats)."""
        views = [view(r) for r in records]
        node = next((r.config.verdict for r in views if r.recorded("verdict")), VerdictConfig())
        auto = next((r.repeat.auto for r in views if r.repeat.auto), None)
        max_repeats = int(auto.get("max") or node.max_repeats) if auto else node.max_repeats
        return cls(band=node.band, sequential=auto is not None, max_repeats=max_repeats, trim=node.trim,
                   statistic=node.statistic)


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
    nodes: int = 1  # the nodes its rounds ran on (each round on one: loop/submitit_rounds.py)
    apart: int = 0  # pairs of its runs measured at the same time on one host, pinned to disjoint cores
    node_sd: float | None = None  # paired rounds on several nodes: the between-node sd of the log ratio counted (0: none seen)
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
    same: str = ""  # UNFAIR only: the two sides ran the same program under the same settings, and why (no price)
    axis: str = ""  # the key the two sides differ in (report/comparison.py's COMPARED)
    trim: float = 0.0  # verdict.trim it was judged with
    trimmed: int = 0  # runs (paired: rounds) dropped from each end of a side (0: the plain t)
    statistic: str = ""  # verdict.statistic it was judged with
    estimator: str = ""  # the statistic's name for its estimate in the sentence ("trimmed paired t over 10 rounds, ...")
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
        pct = f"{100 * self.trim:.3g} % trimmed"
        if self.paired:
            return self.estimator or (f"trimmed paired t over {self.paired} rounds, {pct}" if self.trimmed else
                                      f"paired t over {self.paired} rounds" + (", too few to trim" if self.trim else ""))
        why = f", {self.unpaired}" if self.unpaired else ""
        if self.trimmed:
            return (self.estimator or f"Yuen's trimmed t, {pct}") + why
        return f"{self.estimator or 'Welch'}{why}" if self.unpaired else ""

    @property
    def text(self) -> str:
        """The one sentence every view prints."""
        on = (f" on {self.what}" if self.what else "") + (f" {self.mode}" if self.mode else "")
        pct = lambda x: f"{100 * x:.3g} %"  # noqa: E731
        each = ("one run each" if self.n_a == self.n_b == 1 else f"{self.n_a} repeats each" if self.n_a == self.n_b
                else f"{self.n_a} and {self.n_b} repeats")
        if self.outcome == FASTER and self.faster == self.b:
            each = f"{self.n_b} repeats each" if self.n_a == self.n_b else f"{self.n_b} and {self.n_a} repeats"
        tail = each + (", interleaved" if self.interleaved else "") + \
            (f", rounds on {self.nodes} nodes" if self.nodes > 1 else "")
        if self.apart:
            tail += f", {self.apart} pair(s) of runs measured at the same time on one host, on disjoint cores"
        if self.node_sd is not None:
            tail += f", node-to-node spread {pct(self.node_sd)} counted" if self.node_sd else \
                ", no node-to-node spread seen"
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
        if self.outcome == UNFAIR and self.same:  # a swept condition that changed nothing (report/determinism_price.py)
            return f"{self.a} vs {self.b}{on}: the same program in both modes ({self.same}): no price to measure"
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


# ---- the tests on a statistic's estimate ---------------------------------------------------


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


def nodes_of(a: Side, b: Side) -> list | None:
    """The node of each complete round of a pair, in `rounds_of`'s order (a round that spanned two
    nodes is a level of its own: both names); None where nodes are not known on both sides."""
    if a.nodes is None or b.nodes is None or len(a.nodes) != len(a.medians) or len(b.nodes) != len(b.medians) \
            or rounds_of(a, b) is None:
        return None
    keys_a, keys_b = _usable(a)[1], _usable(b)[1]
    node_a = dict(zip(keys_a, [a.nodes[i] for i, m in enumerate(a.medians) if _ok(m)]))
    node_b = dict(zip(keys_b, [b.nodes[i] for i, m in enumerate(b.medians) if _ok(m)]))
    return [node_a[k] if node_a[k] == node_b[k] else tuple(sorted((node_a[k], node_b[k]))) for k in keys_a]


def between_nodes(diffs: Sequence[float], nodes: Sequence) -> tuple[float, float, int]:
    """(sigma_b^2, its share of the mean's variance sigma_b^2 sum n_j^2 / N^2, nodes): the one-way
    random-effects ANOVA estimate of the between-node variance of the log ratios (module
    docstring, "Nodes are a level of their own"); 0 where one node, or no spread between them."""
    groups: dict = {}
    for d, node in zip(diffs, nodes):
        groups.setdefault(node, []).append(d)
    k, n = len(groups), len(diffs)
    if k < 2 or n <= k:
        return 0.0, 0.0, k
    grand = sum(diffs) / n
    means = {g: sum(x) / len(x) for g, x in groups.items()}
    msb = sum(len(x) * (means[g] - grand) ** 2 for g, x in groups.items()) / (k - 1)
    msw = sum((d - means[g]) ** 2 for g, x in groups.items() for d in x) / (n - k)
    n0 = (n - sum(len(x) ** 2 for x in groups.values()) / n) / (k - 1)
    sigma2 = max(0.0, (msb - msw) / n0)
    return sigma2, sigma2 * sum(len(x) ** 2 for x in groups.values()) / n ** 2, k


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
          interleaved: bool = False, family: int = 1, look: str = "", estimate_more: bool = True,
          trim: float = TRIM, statistic: str = STATISTIC) -> Verdict:
    """One pair at one level `alpha` (a Holm step or a look's spent increment already applied):
    the `statistic` (report/statistic.py, at `trim`) paired over its rounds where both sides carry
    rounds and they are complete, else unpaired on the run medians (Yuen's trimmed Welch t; Welch).
    `estimate_more=False` leaves `more` None (a look whose "cannot tell" is not shown)."""
    stat = S.get(statistic, trim)
    la, lb = _logs(a.medians), _logs(b.medians)
    if not la or not lb:
        raise ValueError(f"{a.name if not la else b.name} has no ok run to compare")
    pairs = rounds_of(a, b)
    given = a.rounds is not None and b.rounds is not None
    base = dict(a=a.name, b=b.name, n_a=len(la), n_b=len(lb), band=band, what=what, interleaved=interleaved,
                busy=a.busy + b.busy, family=family, look=look, alpha=alpha, trim=trim, statistic=statistic,
                unpaired="" if pairs is not None or not given else "rounds incomplete")
    if min(len(la), len(lb)) < 2:
        return Verdict(SINGLE, ratio=_exp(sum(lb) / len(lb) - sum(la) / len(la)), **base)
    if pairs is not None:
        est = stat.paired([x for x, _ in pairs], [y for _, y in pairs])
        d, se, df, base["trimmed"], base["estimator"] = est.d, est.se, est.df, est.trimmed, est.words
        base["paired"] = len(pairs)
        if (at := nodes_of(a, b)) is not None and len(set(at)) > 1:  # rounds on several nodes: a level of its own
            sigma2, extra, k = between_nodes([math.log(y) - math.log(x) for x, y in pairs], at)
            base["node_sd"] = math.expm1(math.sqrt(sigma2))
            if extra > 0:
                total = se ** 2 + extra
                df = total ** 2 / ((se ** 4 / df if se else 0.0) + extra ** 2 / (k - 1))  # Satterthwaite
                se = math.sqrt(total)
    else:
        est = stat.unpaired(a.medians, b.medians)
        d, se, df, base["trimmed"], base["estimator"] = est.d, est.se, est.df, est.trimmed, est.words
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
          look: str = "", estimate_more: bool = True, trim: float = TRIM,
          statistic: str = STATISTIC) -> list[Verdict]:
    """Each pair judged at its Holm step's level: in order of p, step i uses alpha / (m - i),
    until a pair fails to be called faster; every later pair uses that last level."""
    m = len(pairs)
    if m == 1:
        a, b, what = pairs[0]
        return [judge(a, b, band, alpha, what, interleaved, look=look, estimate_more=estimate_more, trim=trim,
                      statistic=statistic)]
    first = [judge(a, b, band, alpha, what, interleaved, estimate_more=False, trim=trim, statistic=statistic)
             for a, b, what in pairs]
    order = sorted(range(m), key=lambda i: (first[i].p if first[i].p is not None else 2.0))
    out: list[Verdict | None] = [None] * m
    step_alpha = alpha / m
    for rank, i in enumerate(order):
        step_alpha = alpha / (m - rank)
        a, b, what = pairs[i]
        v = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look, estimate_more=estimate_more,
                  trim=trim, statistic=statistic)
        out[i] = v
        if v.outcome != FASTER:  # Holm stops rejecting here: the rest keep this level
            for j in order[rank + 1:]:
                a, b, what = pairs[j]
                out[j] = judge(a, b, band, step_alpha, what, interleaved, family=m, look=look,
                               estimate_more=estimate_more, trim=trim, statistic=statistic)
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
        return _holm(pairs, plan.alpha, plan.band, plan.interleaved, trim=plan.trim, statistic=plan.statistic)
    planned, spend = looks(plan.max_repeats), spending(plan.max_repeats, plan.alpha)
    rounds = max(_rounds(a, b) for a, b, _ in pairs)
    final: list[Verdict | None] = [None] * len(pairs)
    for n, k in enumerate(planned, 1):
        if k > rounds or all(f is not None for f in final):
            break
        cut = [(*first_rounds(a, b, k), what) for a, b, what in pairs]
        for i, v in enumerate(_holm(cut, spend[k], plan.band, plan.interleaved, estimate_more=False, trim=plan.trim,
                                    statistic=plan.statistic)):
            if final[i] is None and v.decided:
                final[i] = replace(v, look=f"auto: decided after {k} rounds (look {n} of {len(planned)})")
    waiting = next((k for k in planned if k > rounds), None)
    if waiting is None or rounds >= plan.max_repeats:
        why = f"auto: stopped at verdict.max_repeats={plan.max_repeats}"
    else:
        why = f"auto: undecided after {rounds} rounds (next look after {waiting})"
    if all(f is not None for f in final):
        return final  # type: ignore[return-value]
    now = _holm(pairs, spend[waiting or planned[-1]], plan.band, plan.interleaved, trim=plan.trim,
                statistic=plan.statistic)
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
            names: tuple[str, str] = ("A", "B"), alpha: float = ALPHA, paired: bool = False,
            trim: float = TRIM, statistic: str = STATISTIC) -> Verdict:
    """`repro.verdict`: two configs' runs, each run a list of its step times in seconds (the
    steady steps: leave the compile step out), judged as the views judge recorded runs.
    `paired=True`: a[i] and b[i] ran in the same round i (the `statistic` on their log ratios:
    report/statistic.py, default the adaptive trimmed paired t); else unpaired (Yuen's trimmed
    Welch t). `trim`: the share of rounds (runs) dropped from each end (0.2, for the adaptive
    statistic the most; 0: the plain paired t and Welch). Times that are not finite and positive,
    an empty run, unequal rounds when paired, `band` outside (0, 1), `alpha` outside (0, 0.5),
    `trim` outside [0, 0.4) and a `statistic` not registered raise ValueError."""
    from statistics import median

    for key, value, top, why in (("band", band, 1, "0.02: ±2 %"),
                                 ("alpha", alpha, 0.5, "0.05: 95 % confidence; the equivalence test reads a "
                                                       "1 - 2 alpha interval, empty from 0.5 on")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < top:
            raise ValueError(f"repro.verdict: {key}={value!r} must be between 0 and {top} (exclusive; {why})")
    if isinstance(trim, bool) or not isinstance(trim, numbers.Real) or not 0 <= trim < TRIM_MAX:
        raise ValueError(f"repro.verdict: trim={trim!r} must be in [0, {TRIM_MAX}) (the share of rounds dropped "
                         "from each end: 0.2 trims 20 %; 0 gives the plain paired t)")
    if (why := S.unknown(statistic)) is not None:
        raise ValueError(f"repro.verdict: {why}")
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
    return judge(sides[0], sides[1], band, alpha, trim=float(trim), statistic=statistic)
