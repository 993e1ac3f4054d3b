"""repro bisect's decisions (bisect/decide.py) and culprit search (bisect/search.py), on constructed
medians and calls: no process, no clock. Counts and outcomes only (benchmarks/bisect_simulation.py
measures the rates)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from repro.bisect import decide as D
from repro.bisect.search import DEFAULT_RATES, MAX_REPEATS, Probe, Rates, Search

NOISELESS = Rates(0.001, 0.001)  # a probe that is (nearly) never wrong


def call(p: int, k: int) -> str:
    """The true call at position p when the culprit is k."""
    return "bad" if p >= k else "good"


def bisect(n: int, k: int, rates: Rates = DEFAULT_RATES, flip: int | None = None,
           budget: int = 40) -> tuple[Search, int]:
    """Probe as the search asks, with true calls except the `flip`-th (0-based), until it stops."""
    s, probes = Search(n, rates), 0
    while probes < budget and (p := s.next()) is not None:
        outcome = call(p, k)
        if probes == flip:
            outcome = "good" if outcome == "bad" else "bad"
        s.update(Probe(p, outcome, 1.0, 1.0, 1.0, 5))
        probes += 1
    return s, probes


@pytest.mark.parametrize("k", range(1, 17))
def test_noiseless_probes_find_every_culprit_in_log2_n(k):
    s, probes = bisect(16, k, NOISELESS)
    assert s.decided()[0] == k
    assert probes <= math.ceil(math.log2(16))


@pytest.mark.parametrize("n, extra", [(8, 2), (15, 2), (16, 2), (64, 3)])
def test_at_the_default_rates_one_call_never_decides_a_boundary(n, extra):
    """At DEFAULT_RATES a single call is not enough to tell k from k + 1 (odds 19:1 at 5 %), so the
    search calls the culprit's boundary twice: at most ceil(log2 n) + 2 probes up to 16 candidates
    (the issue's bound); at 64, the 32 positions one first call away need one call more."""
    worst = 0
    for k in range(1, n + 1):
        s, probes = bisect(n, k)
        assert s.decided()[0] == k
        worst = max(worst, probes)
    assert worst <= math.ceil(math.log2(n)) + extra


def test_one_wrong_call_ends_at_the_culprit_or_undecided():
    """Every culprit of 16, each of the first 8 probes called wrong in turn, and a seeded random
    one: the search never names a wrong position."""
    rng = np.random.default_rng(56)
    ends = {"right": 0, "wrong": 0, "undecided": 0}
    for k in range(1, 17):
        for flip in [*range(8), int(rng.integers(0, 8))]:
            s, _ = bisect(16, k, flip=flip)
            d = s.decided()
            ends["undecided" if d is None else "right" if d[0] == k else "wrong"] += 1
    assert ends["wrong"] == 0
    assert ends["right"] + ends["undecided"] == 16 * 9
    assert ends["right"] >= 16 * 8  # one wrong call is outvoted, not just refused


def test_a_non_monotone_history_is_named_and_not_forced_into_a_culprit():
    s = Search(16)
    for _ in range(MAX_REPEATS):
        for p, outcome in ((4, "bad"), (9, "good")):
            assert s.nonmonotone() in (None, (4, 9))
            s.update(Probe(p, outcome, 1.0, 1.0, 1.0, 5))
            if s.nonmonotone() is not None and len(s.calls(4)) < MAX_REPEATS:
                assert s.next() in (4, 9)  # it re-probes the pair, not elsewhere
    assert s.nonmonotone() == (4, 9)
    assert s.decided() is None
    assert s.next() is None  # both called MAX_REPEATS times, the same way: said, not resolved


def test_a_wrong_call_outvoted_dissolves_the_non_monotone_pair():
    s = Search(16)
    for p, outcome in ((8, "bad"), (4, "good"), (6, "bad"), (5, "good"), (7, "good")):  # 7 "good" is wrong (k = 6)
        s.update(Probe(p, outcome, 1.0, 1.0, 1.0, 5))
    assert s.nonmonotone() == (6, 7)
    while (p := s.next()) is not None:
        s.update(Probe(p, call(p, 6), 1.0, 1.0, 1.0, 5))
    assert s.nonmonotone() is None
    assert s.decided()[0] == 6


def test_unknown_carries_no_information():
    s = Search(16)
    before = s.posterior
    s.update(Probe(8, "unknown", 1.02, 0.98, 1.07, 10))
    assert s.posterior == before
    assert len(s.probes) == 1


def test_replay_from_dicts_gives_the_same_posterior():
    s, probes = bisect(64, 37, flip=2)
    record = json.loads(json.dumps([p.to_dict() for p in s.probes]))
    again = Search.replay(64, DEFAULT_RATES, record)
    assert again.posterior == s.posterior
    assert again.probes == s.probes
    assert again.decided() == s.decided()
    half = Search.replay(64, DEFAULT_RATES, record[:3])
    assert half.next() == Search.replay(64, DEFAULT_RATES, s.probes[:3]).next()


def test_probe_dicts_round_trip_and_refuse_what_is_not_a_probe():
    p = Probe(3, "unknown", 1.04, 0.0, math.inf, 1, runs=("r1", "r2"))
    d = p.to_dict()
    assert d["hi"] is None and d["runs"] == ["r1", "r2"]
    assert Probe.from_dict(json.loads(json.dumps(d))) == p
    with pytest.raises(ValueError, match="lacks outcome"):
        Probe.from_dict({"position": 3, "ratio": 1.0, "lo": 1.0, "hi": 1.0, "rounds": 3})
    with pytest.raises(ValueError, match="outcome 'maybe'"):
        Probe(3, "maybe", 1.0, 1.0, 1.0, 3)
    with pytest.raises(ValueError, match="false_bad=0"):
        Rates(0, 0.05)
    with pytest.raises(ValueError, match="past the BAD endpoint"):
        Search(8).update(Probe(9, "bad", 1.0, 1.0, 1.0, 3))
    with pytest.raises(ValueError, match="n=0"):
        Search(0)


def test_one_candidate_is_decided_without_a_probe():
    s = Search(1)
    assert s.decided() == (1, 1.0)
    assert s.next() is None


# ---- decide: constructed medians ----------------------------------------------------------

def rounds(n: int, ratio: float, jitter: float = 0.005, seed: int = 0) -> tuple[list[float], list[float]]:
    """n paired rounds: GOOD's medians drift round to round (shared by both runs of a round), the
    other side is `ratio` times slower, each run with its own small jitter."""
    rng = np.random.default_rng(seed)
    base = 0.1 * np.exp(rng.normal(0, 0.03, n))
    good = base * np.exp(rng.normal(0, jitter, n))
    other = base * ratio * np.exp(rng.normal(0, jitter, n))
    return [float(x) for x in good], [float(x) for x in other]


def test_a_clear_gap_reproduces_and_a_candidate_like_bad_is_called_bad():
    good, bad = rounds(5, 1.3)
    early = D.confirm(good[:3], bad[:3])  # called after 3 rounds; the gap's size is measured over 5
    assert (early.outcome, early.more, early.next) == (D.UNKNOWN, True, 5)
    assert "BAD is slower" in early.sentence
    c = D.confirm(good, bad)
    assert (c.outcome, c.more, c.rounds) == (D.REPRODUCES, False, 5)
    assert "called slower after 3 rounds" in c.sentence
    assert c.lo > 1 and c.lo < c.ratio < c.hi
    gap = c.ratio - 1
    assert D.classify(*rounds(3, 1.3, seed=1), gap).outcome == D.BAD
    assert D.classify(*rounds(3, 1.0, seed=2), gap).outcome == D.GOOD


def test_identical_endpoints_do_not_reproduce():
    good, same = rounds(10, 1.0)
    c = D.confirm(good, same)
    assert c.outcome == D.NOT_REPRODUCED and not c.more
    exact = [0.1] * 10  # no spread at all: no verdict until the cap, then a refusal
    for n in D.looks():
        c = D.confirm(exact[:n], exact[:n])
        assert (c.outcome, c.more) == ((D.UNKNOWN, True) if n < 10 else (D.NOT_REPRODUCED, False))
    assert "nothing to bisect" in c.sentence


def test_a_call_whose_rounds_were_the_slow_ones_sets_no_gap():
    """BAD called slower after 3 rounds, but its next two rounds faster: the trimmed estimate over 5
    is below 1, so no threshold is set from it: more rounds, and at the cap a refusal."""
    d = [0.10, 0.11, 0.12, -0.3, -0.3, -0.3, -0.3]
    good = [0.1] * len(d)
    bad = [0.1 * math.exp(x) for x in d]
    assert D.confirm(good[:3], bad[:3]).next == 5
    c = D.confirm(good[:5], bad[:5])
    assert (c.outcome, c.more, c.next) == (D.UNKNOWN, True, 7)
    assert c.ratio < 1
    c = D.confirm(good, bad, max_rounds=7)
    assert (c.outcome, c.more) == (D.NOT_REPRODUCED, False)


def test_bad_faster_than_good_does_not_reproduce():
    assert D.confirm(*rounds(5, 0.7)).outcome == D.NOT_REPRODUCED


def test_a_candidate_at_the_midpoint_is_unknown_with_more_rounds_then_final_at_the_cap():
    gap = 0.2
    mid = D.threshold(gap)
    assert mid == pytest.approx(math.sqrt(1.2))
    good, _ = rounds(10, 1.0)
    spread = [0.02, -0.02, 0.01, -0.01, 0.03, -0.03, 0.015, -0.015, 0.025, -0.025]  # centred on the midpoint
    cand = [g * mid * math.exp(e) for g, e in zip(good, spread)]
    first = D.classify(good[:3], cand[:3], gap)
    assert (first.outcome, first.more, first.next) == (D.UNKNOWN, True, 5)
    assert first.lo < mid < first.hi
    last = D.classify(good, cand, gap)
    assert (last.outcome, last.more, last.next) == (D.UNKNOWN, False, 0)
    assert "after the cap" in last.sentence


def test_decide_refuses_what_is_not_paired_rounds():
    with pytest.raises(ValueError, match="GOOD has 3 rounds and BAD 2"):
        D.confirm([1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="not a finite positive"):
        D.confirm([1.0, -1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="gap=0"):
        D.classify([1.0, 1.0], [1.0, 1.0], 0)
    with pytest.raises(ValueError, match="alpha=0.5"):
        D.confirm([1.0, 1.1], [1.0, 1.2], alpha=0.5)
    with pytest.raises(ValueError, match="max_repeats=1"):
        D.confirm([1.0], [1.0], max_rounds=1)
    assert D.looks(10) == (3, 5, 7, 10)
