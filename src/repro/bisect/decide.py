"""Turning a probe's paired rounds into a call: the one place (the driver and benchmarks/bisect_simulation.py use it).

Both calls are the verdict engine's (repro/report/verdict.py), not a copy of it: each round runs
the two sides once (interleaved), each run is reduced to its steady median, and the within-round
log ratios go through the engine's trimmed paired t at its planned looks (`looks`: after rounds 3,
5, 7 and 10 where the cap allows, and the cap itself), alpha spent across the looks by its
power-family spending function (`verdict.spending`), so that the chance of a false call at any
look is at most alpha whenever the caller stops. Between looks and before the first one, a call is
"unknown" with `more=True` and `next` the rounds of the next look; at the cap (`max_rounds`, the
`verdict.max_repeats` of a sweep) it is final.

`confirm(good, bad)`: does this machine reproduce the gap between the two endpoints?
- "reproduces": BAD called slower than GOOD at a look (the engine's "faster", GOOD the faster side);
- "does not reproduce": BAD called faster, or the two called equivalent within `band` (the
  engine's TOST, ±2 %), or no call by the cap: the gap was not shown here, so there is nothing to
  bisect. Between identical endpoints the engine calls BAD slower at most alpha / 2 of the time (a
  two-sided test, one side of it), so an A/A bisection refuses at least 1 - alpha / 2 of the time.
- "unknown" (`more=True`): under the cap and not yet called: run rounds up to `next` and ask again.
  Also when BAD was called slower before GAP_ROUNDS (5) rounds: the call stands, but the gap's
  size, which sets every probe's threshold, is measured over at least 5 rounds, the first count at
  which a round can be trimmed from each end. At 3 rounds nothing is trimmed, so one slow
  process in BAD's three (the slow-process model: one in ten, 60 % slower) inflated a 10 % gap to
  about 30 %, moved the midpoint above BAD itself, and every truly bad candidate of that
  bisection was called like-good: simulated, a false like-good rate of 6 % at a 10 % regression
  and wrong culprits, clustered in such bisections. The gap's size is the engine's trimmed paired
  estimate (verdict.trimmed_paired, `trim` of each end: one round of 5, two of 10) over every round
  given, whichever `verdict.statistic` made the call, with its (1 - alpha) interval (95 %: the
  gap's size is an estimate; the call was the look's, at its spent share of alpha). Where that
  estimate is not above 1 (the call's rounds were the slow ones), there is no gap to set a
  threshold by: more rounds to the cap, then "does not reproduce" (this only ever refuses more).

`classify(good, cand, gap)`: is a candidate like GOOD or like BAD? `gap` is the confirmed
BAD/GOOD ratio - 1. The threshold is the gap's midpoint on the log scale, T = sqrt(1 + gap) (the
geometric mean of 1 and 1 + gap; about 1 + gap/2: 1.0247 for a 5 % gap, 1.140 for 30 %):
- "good" (like-good): the candidate/GOOD ratio's interval lies wholly below T;
- "bad" (like-bad): its interval lies wholly above T;
- "unknown": the interval holds T (more rounds while under the cap; at the cap the probe carries
  no information, search.py).
It is the engine's test of "no difference" applied to the candidate's medians divided by T (a
shift of every log ratio by log T, which moves the trimmed mean and leaves its spread alone), so a
candidate that is truly GOOD's equal is called like-bad at most alpha / 2 of the time, and one truly
BAD's equal like-good at most alpha / 2 of the time, at any noise; how often each is called at all
is the noise's and the rounds' (benchmarks/bisect_simulation.py measures both, and the search's
error rates, search.DEFAULT_RATES, come from there). The equivalence outcome is not used (a
candidate "equivalent to T" says nothing), so its band is set to nothing.

Why a larger alpha for probes (PROBE_ALPHA = 0.2, confirm's stays 0.05): alpha bounds the error
of a candidate whose true ratio sits at T, but a candidate is GOOD's equal or BAD's, half the gap
away from T on the log scale, so its real error rate is far below alpha / 2; and the search weighs
every call by its measured error rate, so a call it may distrust is worth more than no call.
Simulated (benchmarks/bisect_simulation.py, 30 bisections per cell, seed 0, 2 % and slow-process
noise, 5-30 % regressions pooled; before the GAP_ROUNDS rule), the share of probes left unknown at
the 10-round cap was 40-53 % at alpha 0.05, 21-33 % at 0.2 and 11-20 % at 0.4; at 0.4 (60 per
cell) a truly bad candidate was called like-good 3.5 % of the time at a 5 % regression under slow
processes (upper bound 6.7 %) and clean 2 % noise there called 2-3 % wrong both ways. At 0.2,
with the GAP_ROUNDS rule (100 per cell), that slow-process cell's false like-good rate was 5.1 %
and every cell at 10 or 30 % stayed at 1.1 % or less (search.py's DEFAULT_RATES).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

from repro.report import verdict as V

REPRODUCES, NOT_REPRODUCED = "reproduces", "does not reproduce"
GOOD, BAD, UNKNOWN = "good", "bad", "unknown"
GAP_ROUNDS = 5  # confirm: the rounds the confirmed gap is measured over, at least (module docstring)
PROBE_ALPHA = 0.2  # classify's alpha: module docstring ("Why a larger alpha for probes")
NO_BAND = 1e-12  # classify: the engine's equivalence test against T never passes (it would say nothing)


@dataclass(frozen=True)
class Call:
    """A call on paired rounds: `outcome` ("good" | "bad" | "unknown"; confirm: "reproduces" |
    "does not reproduce" | "unknown"), `ratio` the other side over the reference (GOOD) as the
    engine estimates it (the exp of the trimmed mean within-round log ratio), `lo`–`hi` its
    interval at `level`, `rounds` paired rounds used, `more`: unknown and under the cap (run rounds
    up to `next` and call again), `sentence` what a person reads."""

    outcome: str
    ratio: float
    lo: float
    hi: float
    rounds: int
    more: bool
    sentence: str
    level: float = 1 - V.ALPHA  # the confidence of lo–hi (a look's spent alpha: wider than 95 % at early looks)
    next: int = 0  # more=True: the rounds of the next look (0: final)
    threshold: float = 0.0  # classify: T, the ratio that splits like-good from like-bad (0: confirm)


def looks(max_rounds: int = V.MAX_REPEATS) -> tuple[int, ...]:
    """The rounds after which a call is made (the verdict engine's planned looks)."""
    return V.looks(max_rounds)


def _checked(name: str, xs: Sequence[float]) -> tuple[float, ...]:
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__len__"):
        raise ValueError(f"{name} must be a list of steady medians in seconds, one per round")
    for i, x in enumerate(xs):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x <= 0:
            raise ValueError(f"{name} round {i}: {x!r:.40} is not a finite positive median in seconds")
    return tuple(float(x) for x in xs)


def _pair(ref: Sequence[float], other: Sequence[float], names: tuple[str, str]) -> tuple[tuple, tuple]:
    a, b = _checked(names[0], ref), _checked(names[1], other)
    if len(a) != len(b):
        raise ValueError(f"{names[0]} has {len(a)} rounds and {names[1]} {len(b)}: paired rounds need one "
                         "median of each per round")
    if not a:
        raise ValueError(f"{names[0]} and {names[1]} have no rounds: run at least one paired round")
    return a, b


def _judged(a: tuple, b: tuple, names: tuple[str, str], shift: float, band: float, alpha: float,
            max_rounds: int, trim: float) -> V.Verdict:
    """The engine's sequential verdict on b / shift against a, at the planned looks up to max_rounds."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha={alpha!r:.40} must be in (0, 0.5) (0.05: a false call at most 5 % of the time)")
    keys = tuple(range(len(a)))
    pair = (V.Side(names[0], a, rounds=keys), V.Side(names[1], tuple(x / shift for x in b), rounds=keys), "")
    (v,) = V.decide_family([pair], V.Plan(band=band, alpha=alpha, sequential=True, max_repeats=max_rounds,
                                          interleaved=True, trim=trim))
    return v


def _interval(v: V.Verdict, shift: float) -> tuple[float, float, float]:
    """(lo, hi, level) of the ratio b/a, the shift undone; a single round: no interval (0, inf)."""
    ci = v.interval
    if ci is None:
        return 0.0, math.inf, v.level
    lo, hi = ci
    return lo * shift, hi * shift, v.level


def _next_look(rounds: int, max_rounds: int) -> int:
    return next((k for k in looks(max_rounds) if k > rounds), 0)


def _ci(lo: float, hi: float, level: float) -> str:
    if not math.isfinite(hi):
        return "no interval from one round"
    return f"{100 * level:.3g} % CI {V.bound_text(lo)}–{V.bound_text(hi)}"


def _how(v: V.Verdict, rounds: int) -> str:
    return v.analysis or f"{rounds} round{'s' * (rounds != 1)}"


def _gap(a: tuple, b: tuple, alpha: float, trim: float) -> tuple[float, float, float, int]:
    """(ratio, lo, hi, rounds trimmed from each end): the confirmed gap's size, the trimmed mean of every
    round's ratio (a slow process does not move the threshold it sets: what benchmarks/bisect_simulation.py
    measured), with the (1 - alpha) interval of the verdict's own statistic (verdict.statistic: the paired t
    below 7 rounds). The trimmed t's own interval at 5 rounds keeps 3 rounds and was far too wide to state
    beside "reproduces" (0.73-5.49 for five ratios of 1.5-2.8)."""
    from repro.report import statistic as S

    d, _, _, k = V.trimmed_paired(a, b, trim)
    est = S.get(S.STATISTIC, trim).paired(a, b)
    half = V.t_ppf(1 - alpha / 2, est.df) * est.se if est.se else 0.0
    return math.exp(d), math.exp(est.d - half), math.exp(est.d + half), k


def confirm(good: Sequence[float], bad: Sequence[float], alpha: float = V.ALPHA, max_rounds: int = V.MAX_REPEATS,
            band: float = V.BAND, trim: float = V.TRIM) -> Call:
    """Does this machine reproduce BAD's slowdown over GOOD? good[i], bad[i]: round i's steady
    medians (paired, interleaved). "reproduces" only when BAD is called slower (module docstring)."""
    a, b = _pair(good, bad, ("GOOD", "BAD"))
    n = len(a)
    v = _judged(a, b, ("GOOD", "BAD"), 1.0, band, alpha, max_rounds, trim)
    lo, hi, level = _interval(v, 1.0)
    used = v.paired or v.n_a if v.decided else n  # a look that decided used its first rounds
    said = f"BAD/GOOD {v.ratio:.3f} ({_ci(lo, hi, level)}, {_how(v, n)})"
    flat = f"{v.flat}: no spread to judge, " if v.flat else ""
    if v.decided and v.outcome == V.FASTER and v.ratio > 1:
        if n < min(GAP_ROUNDS, max_rounds):  # called, but its size is not yet measured as the probes need it
            nxt = next(k for k in looks(max_rounds) if k >= min(GAP_ROUNDS, max_rounds))
            return Call(UNKNOWN, v.ratio, lo, hi, n, True, f"BAD is slower ({said}); the gap, which sets every "
                        f"probe's threshold, is measured over {nxt} rounds: next look after {nxt} rounds", level, nxt)
        ratio, lo, hi, k = _gap(a, b, alpha, trim)
        level = 1 - alpha
        if ratio <= 1:  # the call's rounds were the slow ones: no gap to set a threshold by
            said = (f"BAD/GOOD {ratio:.3f} (the trimmed mean of {n} rounds' ratios; {_ci(lo, hi, level)}), though "
                    f"called slower after {used} rounds")
            if n < max_rounds:
                nxt = _next_look(n, max_rounds)
                return Call(UNKNOWN, ratio, lo, hi, n, True, f"cannot tell yet whether the gap reproduces: {said}; "
                            f"next look after {nxt} rounds", level, nxt)
            return Call(NOT_REPRODUCED, ratio, lo, hi, n, False, f"the gap does not reproduce here: {said}; "
                        "nothing to bisect", level)
        said = (f"BAD/GOOD {ratio:.3f} (the trimmed mean of {n} rounds' ratios, {k} trimmed "
                f"from each end; {_ci(lo, hi, level)}; called slower after {used} rounds, {_how(v, used)})")
        return Call(REPRODUCES, ratio, lo, hi, n, False, f"the gap reproduces here: {said}; its midpoint "
                    f"{math.sqrt(ratio):.3f} splits like-good from like-bad", level)
    if v.decided and v.outcome == V.FASTER:
        return Call(NOT_REPRODUCED, v.ratio, lo, hi, used, False,
                    f"the gap does not reproduce here: BAD is faster than GOOD, {said}; nothing to bisect", level)
    if v.decided:
        return Call(NOT_REPRODUCED, v.ratio, lo, hi, used, False,
                    f"the gap does not reproduce here: BAD and GOOD are equivalent within ±{100 * band:.3g} %, "
                    f"{said}; nothing to bisect", level)
    if n >= max_rounds:
        return Call(NOT_REPRODUCED, v.ratio, lo, hi, n, False,
                    f"the gap does not reproduce here: {flat}{said}, BAD not shown slower by the cap of "
                    f"{max_rounds} rounds; nothing to bisect", level)
    nxt = _next_look(n, max_rounds)
    return Call(UNKNOWN, v.ratio, lo, hi, n, True, f"cannot tell yet whether the gap reproduces: {flat}{said}; "
                f"next look after {nxt} rounds", level, nxt)


def threshold(gap: float) -> float:
    """The candidate/GOOD ratio that splits like-good from like-bad: sqrt(1 + gap)."""
    if isinstance(gap, bool) or not isinstance(gap, numbers.Real) or not math.isfinite(gap) or gap <= 0:
        raise ValueError(f"gap={gap!r:.40} must be the confirmed BAD/GOOD ratio - 1, above 0 (0.08: 8 % slower)")
    return math.sqrt(1 + gap)


def classify(good: Sequence[float], cand: Sequence[float], gap: float, alpha: float = PROBE_ALPHA,
             max_rounds: int = V.MAX_REPEATS, trim: float = V.TRIM) -> Call:
    """Is the candidate like GOOD or like BAD? good[i], cand[i]: round i's steady medians of the GOOD
    endpoint and the candidate (paired, interleaved); `gap`: the confirmed BAD/GOOD ratio - 1, whose
    log midpoint T = sqrt(1 + gap) is the threshold (module docstring)."""
    t = threshold(gap)
    a, b = _pair(good, cand, ("GOOD", "candidate"))
    n = len(a)
    v = _judged(a, b, ("GOOD", "candidate"), t, NO_BAND, alpha, max_rounds, trim)
    lo, hi, level = _interval(v, t)
    ratio = v.ratio * t
    used = v.paired or v.n_a if v.decided else n
    said = f"candidate/GOOD {ratio:.3f} ({_ci(lo, hi, level)}, {_how(v, n)})"
    mid = f"the midpoint {t:.3f} of the confirmed gap {1 + gap:.3f}"
    if v.decided and v.ratio > 1:
        return Call(BAD, ratio, lo, hi, used, False, f"like-bad: {said}, above {mid}", level, 0, t)
    if v.decided:
        return Call(GOOD, ratio, lo, hi, used, False, f"like-good: {said}, below {mid}", level, 0, t)
    flat = f"{v.flat}: no spread to judge, " if v.flat else ""
    if n >= max_rounds:
        return Call(UNKNOWN, ratio, lo, hi, n, False, f"unknown: {flat}{said} holds {mid} after the cap of "
                    f"{max_rounds} rounds", level, 0, t)
    nxt = _next_look(n, max_rounds)
    return Call(UNKNOWN, ratio, lo, hi, n, True, f"cannot tell yet: {flat}{said} holds {mid}; next look after "
                f"{nxt} rounds", level, nxt, t)
