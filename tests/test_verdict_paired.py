"""The verdict engine's paired analysis, its planned looks, its refusals and its zero spread
(report/verdict.py), on numbers and on records built by hand: no processes."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import repro
from repro.report import comparison
from repro.report import verdict as V


def _rounds(rng, n: int, shared: float, own: float, gap: float = 0.0) -> tuple[V.Side, V.Side]:
    """n rounds of A and B: a round-shared factor (drift, a neighbour) and each run's own noise."""
    s = rng.normal(0, shared, n)
    a = np.exp(s + rng.normal(0, own, n))
    b = np.exp(s + rng.normal(0, own, n)) * (1 + gap)
    keys = tuple(range(n))
    return V.Side("A", tuple(a), rounds=keys), V.Side("B", tuple(b), rounds=keys)


def test_pairing_cancels_a_round_shared_component():
    """A 6 % shared part and a 1 % own part per run: 5 rounds paired (the plain paired t) find a 3 %
    gap nearly always, Welch on the same run medians rarely; the trimmed paired t (verdict.statistic=
    trimmed) drops one round of five from each end and pays for it in clean noise (about half); the
    default adaptive statistic trims nothing below 7 rounds: it is the paired t; between identical
    configs it stays at alpha."""
    rng = np.random.default_rng(3)
    paired = trimmed = welch = false = 0
    trials = 300
    for _ in range(trials):
        a, b = _rounds(rng, 5, 0.06, 0.01, gap=0.03)
        v = V.judge(a, b, statistic="trimmed")
        assert v.paired == 5 and "trimmed paired t over 5 rounds, 20 % trimmed" in v.text
        trimmed += v.outcome == V.FASTER and v.faster == "A"
        p = V.judge(a, b, trim=0)
        assert p.paired == 5 and "paired t over 5 rounds)" in p.text
        d = V.judge(a, b)  # the default: the adaptive statistic, the paired t below 7 rounds
        assert "paired t over 5 rounds, too few to trim" in d.text and (d.d, d.se, d.df) == (p.d, p.se, p.df)
        paired += p.outcome == V.FASTER and p.faster == "A"
        w = V.judge(V.Side("A", a.medians), V.Side("B", b.medians), trim=0)
        assert w.paired == 0 and "paired" not in w.text
        welch += w.outcome == V.FASTER and w.faster == "A"
        aa, bb = _rounds(rng, 5, 0.06, 0.01)
        false += V.judge(aa, bb).outcome == V.FASTER
    assert paired / trials >= 0.9 and welch / trials <= 0.3 and 0.35 <= trimmed / trials < paired / trials
    assert false / trials <= 0.08  # 5 % nominal; 300 trials


def test_paired_interval_is_the_t_on_log_ratios():
    a, b = [1.0, 1.2, 0.9, 1.1], [1.1, 1.3, 1.0, 1.25]
    v = repro.verdict([[x] for x in a], [[y] for y in b], paired=True)
    d = [math.log(y / x) for x, y in zip(a, b)]
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    assert v.df == 3 and v.d == pytest.approx(mean) and v.se == pytest.approx(sd / 2)
    half = V.t_ppf(0.975, 3) * sd / 2
    assert v.interval == pytest.approx((math.exp(mean - half), math.exp(mean + half)))


def _record(rid: str, framework: str, median: float, index: int | None, sweep: str = "s", job: int = 0) -> dict:
    rec = {"id": rid, "status": "ok", "sweep": {"id": sweep, "job": job},
           "config": {"framework": {"name": framework}, "run": {"batch_size": 8, "task": "train"},
                      "model": {"name": "mlp", "preset": "tiny"}, "precision": {"name": "fp32"},
                      "sharding": {"name": "none"}, "hardware": {"name": "cpu"}, "verdict": {"band": 0.02}},
           "results": {"steady_median_s": median}, "overrides": [f"framework={framework}"]}
    if index is not None:
        rec["repeat"] = {"index": index, "count": 5, "group": f"{sweep}/{0 if framework == 'jax' else 1}"}
    return rec


def _sweep(a: list[float], b: list[float], **kw) -> list[dict]:
    out = []
    for k, (x, y) in enumerate(zip(a, b)):
        out += [_record(f"j{k}", "jax", x, k, job=2 * k, **kw), _record(f"t{k}", "torch", y, k, job=2 * k + 1, **kw)]
    return out


def test_records_pair_by_round_and_say_which_analysis():
    jax = [1.00, 1.10, 0.95, 1.05, 1.02]
    torch = [1.08, 1.20, 1.02, 1.12, 1.11]
    (v,) = comparison.build(_sweep(jax, torch)).tables[0].verdicts
    assert v.paired == 5 and "5 repeats each, interleaved, paired t over 5 rounds, too few to trim" in v.text
    assert v.outcome == V.FASTER and v.faster == "jax"
    # a failed torch run in round 2: the rounds are incomplete, Welch on the run medians
    records = _sweep(jax, torch)
    records[5]["status"] = "failed"
    (w,) = comparison.build(records).tables[0].verdicts
    assert w.paired == 0 and "5 and 4 repeats, interleaved, Yuen's trimmed t, 20 % trimmed, rounds incomplete" in w.text
    # an attempt set aside for a rerun is not a run of the verdict: its round stays complete
    extra = _record("t2x", "torch", 9.0, 2, job=99)
    extra["repeat"]["discarded"] = True
    (r,) = comparison.build(_sweep(jax, torch) + [extra]).tables[0].verdicts
    assert r.paired == 5 and r.d == pytest.approx(v.d)


def test_zero_spread_is_never_a_decision():
    """Identical medians (a test's constants; the same records counted twice) and a constant
    ratio in every round: no spread to judge, never "faster" nor a 1.00–1.00 interval."""
    same = repro.verdict([[1.0, 1.0]] * 3, [[1.0]] * 3)
    assert same.outcome == V.UNDECIDED and not same.decided
    assert same.text == "A vs B: cannot tell yet: identical medians: no spread to judge (time ratio B/A 1.00, 3 repeats each)"
    ratio = repro.verdict([[1.0], [2.0], [3.0]], [[2.0], [4.0], [6.0]], paired=True)
    assert ratio.outcome == V.UNDECIDED and "the same ratio in every round: no spread to judge" in ratio.text
    assert "faster" not in ratio.text and "CI" not in ratio.text
    tiny = repro.verdict([[0.1]] * 3, [[0.1 * (1 + 1e-15)]] * 3)  # rounding, not noise
    assert tiny.outcome == V.UNDECIDED and tiny.flat
    # records duplicated (a resumed sweep reading the same runs as new rounds): not decided
    records = _sweep([1.0, 1.0], [1.0, 1.0]) * 2
    (dup,) = comparison.build(records).tables[0].verdicts
    assert not dup.decided and "no spread to judge" in dup.text
    (seq,) = V.decide_family([(V.Side("a", (1.0,) * 5), V.Side("b", (1.0,) * 5), "")], V.Plan(sequential=True))
    assert not seq.decided


@pytest.mark.parametrize("a, b, kw, message", [
    ([[1.0], [0.0]], [[1.0], [1.1]], {}, "A run 1 step 0: 0.0 is not a finite positive time"),
    ([[1.0], [1.0]], [[1.0, -2.0]], {}, "B run 0 step 1: -2.0 is not a finite positive time"),
    ([[1.0], [math.nan]], [[1.0], [1.1]], {}, "A run 1 step 0: nan is not"),
    ([[1.0], [1.1]], [[math.inf], [1.1]], {}, "B run 0 step 0: inf is not"),
    ([[1.0], []], [[1.0], [1.1]], {}, "A run 1 has no step times"),
    ([[1.0], "ab"], [[1.0], [1.1]], {}, "A run 1 must be a list of step times"),
    ([[1.0], [None]], [[1.0], [1.1]], {}, "A run 1 step 0: None is not"),
    ([[1.0], [1.1]], [[1.0], [1.1]], {"alpha": -1}, "alpha=-1 must be between 0 and 0.5"),
    ([[1.0], [1.1]], [[1.0], [1.1]], {"alpha": math.inf}, "alpha=inf must be between 0 and 0.5"),
    ([[1.0], [1.1]], [[1.0], [1.1]], {"alpha": 1.0}, "alpha=1.0 must be between 0 and 0.5"),
    ([[1.0], [1.1]], [[1.0], [1.1]], {"alpha": 0.75}, "alpha=0.75 must be between 0 and 0.5 (exclusive; 0.05: 95 % "
     "confidence; the equivalence test reads a 1 - 2 alpha interval, empty from 0.5 on)"),
    ([[1.0], [1.1]], [[1.0], [1.1]], {"band": math.nan}, "band=nan must be between 0 and 1"),
    ([[1.0], [1.1]], [[1.0]], {"paired": True}, "paired=True needs one run of each side per round: A has 2 runs, B 1"),
])
def test_bad_input_is_refused_naming_it(a, b, kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        repro.verdict(a, b, **kw)


def test_planned_looks_spend_alpha():
    assert V.looks(10) == (3, 5, 7, 10) and V.looks(5) == (3, 5) and V.looks(4) == (3, 4)
    assert V.looks(2) == (2,) and V.looks(12) == (3, 5, 7, 10, 12)
    for m in (2, 3, 4, 5, 7, 10, 12, 30):
        assert sum(V.spending(m).values()) == pytest.approx(V.ALPHA) and set(V.spending(m)) == set(V.looks(m))
        assert sum(V.spent(k, m) for k in range(2, m + 1)) == pytest.approx(V.ALPHA)
    assert V.spending(5) == pytest.approx({3: 0.018, 5: 0.032})
    assert V.spending(10) == pytest.approx({3: 0.0045, 5: 0.008, 7: 0.012, 10: 0.0255})
    with pytest.raises(ValueError, match="max_repeats=1 must be at least 2"):
        V.looks(1)


def test_a_verdict_is_the_first_planned_look_that_decided():
    rng = np.random.default_rng(11)
    a, b = _rounds(rng, 10, 0.01, 0.01, gap=0.5)
    plan = V.Plan(sequential=True, max_repeats=10)
    (v,) = V.decide_family([(a, b, "")], plan)
    assert v.outcome == V.FASTER and v.n_a == 3 and v.paired == 3
    assert v.look == "auto: decided after 3 rounds (look 1 of 4)" and v.alpha == pytest.approx(0.0045)
    # the same records, stopped after round 2 (before the first look): not decided, whatever the data
    (early,) = V.decide_family([(*V.first_rounds(a, b, 2), "")], plan)
    assert early.outcome == V.UNDECIDED and early.look == "auto: undecided after 2 rounds (next look after 3)"
    assert early.more == 1 and early.n_a == 2
    # undecided between looks: the repeats it asks for reach the next look at least
    base = (1.0, 1.03, 0.98, 1.01, 0.99, 1.02, 0.97)
    other = tuple(x * f for x, f in zip(base, (1.01, 0.99, 1.02, 0.98, 1.015, 0.985, 1.0)))
    near_pair = (V.Side("A", base, rounds=tuple(range(7))), V.Side("C", other, rounds=tuple(range(7))), "")
    for band in (0.014, 0.015):  # at the last look's level (the plain paired t): 1 more repeat; equivalent already
        (near,) = V.decide_family([near_pair], V.Plan(sequential=True, max_repeats=10, band=band, trim=0))
        assert not near.decided and near.look == "auto: undecided after 7 rounds (next look after 10)"
        assert near.more == 3
    # rendering from more rounds than the loop needed gives the same sentence
    for k in (4, 7):
        (again,) = V.decide_family([(*V.first_rounds(a, b, k), "")], plan)
        assert again.text == v.text
    # fixed repeats: one look at alpha
    (fixed,) = V.decide_family([(a, b, "")])
    assert fixed.alpha == V.ALPHA and fixed.look == "" and fixed.n_a == 10


def test_an_undecided_pair_waits_for_the_last_look():
    rng = np.random.default_rng(5)
    a, b = _rounds(rng, 10, 0.0, 0.05, gap=0.01)
    (v,) = V.decide_family([(a, b, "")], V.Plan(sequential=True, max_repeats=10))
    if not v.decided:
        assert v.look == "auto: stopped at verdict.max_repeats=10" and v.n_a == 10


# ---- properties (hypothesis) -------------------------------------------------------------------

times = st.floats(min_value=V.SHORTEST_S, max_value=V.LONGEST_S, allow_nan=False, allow_infinity=False)
runs = st.lists(st.lists(times, min_size=1, max_size=4), min_size=1, max_size=6)
beyond = st.one_of(st.floats(min_value=5e-324, max_value=V.SHORTEST_S, exclude_max=True),
                   st.floats(min_value=V.LONGEST_S, max_value=1e308, exclude_min=True))


@settings(max_examples=100, deadline=2000)
@given(t=beyond, a=runs)
def test_a_time_no_clock_reads_is_refused_at_the_edge(t, a):
    """5e-324 s once read "A is inf× faster (95 % CI inf–inf)": a time whose ratios overflow is refused."""
    with pytest.raises(ValueError, match="no step time a clock reads"):
        repro.verdict([[t], *a], a)


# no deadline: a statistic's first call at a new count simulates its null once (cached), seconds on a loaded machine
@settings(max_examples=400, deadline=None)
@given(a=runs, b=runs, paired=st.booleans(), band=st.floats(0, 1, exclude_min=True, exclude_max=True),
       alpha=st.floats(0, 0.5, exclude_min=True, exclude_max=True))
def test_any_finite_positive_input_gives_a_verdict_whose_interval_holds_its_ratio(a, b, paired, band, alpha):
    if paired:
        n = min(len(a), len(b))
        a, b = a[:n], b[:n]
    v = repro.verdict(a, b, band=band, alpha=alpha, paired=paired)
    assert v.outcome in (V.FASTER, V.EQUIVALENT, V.UNDECIDED, V.SINGLE)
    assert isinstance(v.text, str) and v.text
    if v.outcome != V.SINGLE:
        lo, hi = v.interval
        assert lo <= v.ratio <= hi
        if v.decided:
            assert v.se > 0  # a decision always has a spread behind it


bad_time = st.sampled_from([0.0, -0.0, -1.0, -1e-300, math.nan, math.inf, -math.inf, None, "1"])


@settings(max_examples=200, deadline=2000)
@given(a=runs, b=runs, bad=bad_time, where=st.integers(0, 100), side=st.booleans())
def test_any_bad_time_is_refused_naming_its_run(a, b, bad, where, side):
    target = a if side else b
    run = target[where % len(target)]
    run[where % len(run)] = bad
    with pytest.raises(ValueError, match=f"{'A' if side else 'B'} run {where % len(target)} step"):
        repro.verdict(a, b)


@settings(max_examples=100, deadline=2000)
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0 < x < 0.5),
                       st.integers(-5, 5).filter(lambda x: not 0 < x < 0.5)),
       key=st.sampled_from(["alpha", "band"]))
def test_alpha_and_band_outside_their_range_are_refused(value, key):
    if key == "band" and 0.5 <= value < 1:
        value = 1 + value  # band may be up to 1
    with pytest.raises(ValueError, match=f"{key}="):
        repro.verdict([[1.0], [1.1]], [[1.2], [1.3]], **{key: value})


def test_a_look_counts_the_busy_runs_it_used():
    """An auto sweep decided at round 3 of 6 recorded: the caveat counts the busy runs of those 3
    rounds, never more busy runs than runs ("6 of 4 runs")."""
    flags = (True, False, False, True, True, True)
    a = V.Side("a", (1.0, 1.01, 0.99, 1.0, 1.02, 0.98), busy=4, rounds=tuple(range(6)), busy_at=flags)
    b = V.Side("b", (2.0, 1.99, 2.03, 2.0, 2.01, 1.99), busy=0, rounds=tuple(range(6)), busy_at=(False,) * 6)
    (v,) = V.decide_family([(a, b, "")], V.Plan(sequential=True, max_repeats=6))
    assert v.n_a == 3 and v.busy == 1 and "⚠ 1 of 6 runs measured on a busy machine" in v.text


def test_an_interval_past_a_thousand_is_said_so_not_in_300_digits():
    """Two rounds at Holm's share of alpha gave '99.6 % CI 0.00–1697153879...(300 digits)'."""
    v = repro.verdict([[1.0], [1.0]], [[1.05], [3.0]], paired=True, alpha=0.001)
    assert v.interval[1] > 1000 and "–> 1000," in v.text and len(v.text) < 300
