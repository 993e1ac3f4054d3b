"""`repro calibrate`'s analysis (report/noise.py) on A/A and --gap records simulated with known
noise components: no processes, records built by hand as the calibration loop writes them."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from repro import calibrate
from repro.report import noise
from repro.report import verdict as V


def _records(rng, trials: int, rounds: int, shared: float, own: float, position: float = 0.0,
             sampling: float | None = None, load: float = 0.0, gap: float = 0.0, auto: int | None = None,
             sweep: str = "s") -> list[dict]:
    """Calibration records: each round runs A and B once in a random order; a run's median is
    base × round-shared factor × own factor × (1 + position effect at position 1) × (1 + load
    × other_cpu_share) × (1 + gap on B)."""
    out, job = [], 0
    for trial in range(trials):
        for k in range(rounds):
            s = rng.normal(0, shared)
            for pos, label in enumerate(rng.permutation(["A", "B"])):
                share = float(rng.uniform(0, 0.4))
                m = 1e-3 * math.exp(s + rng.normal(0, own)) * (1 + position * pos) * (1 + load * share)
                m *= 1 + gap if label == "B" else 1
                cal = {"trial": trial, "label": str(label), **({"gap": gap} if gap and label == "B" else {})}
                rep = {"index": k, "position": pos, "count": auto or rounds, "group": f"{sweep}/{label}"}
                if auto:
                    rep["auto"] = {"max": auto, "band": 0.02, "budget_s": None}
                results = {"steady_median_s": m}
                if sampling is not None:
                    results["steady_median_sd_s"] = sampling * m
                out.append({"id": f"{sweep}{job}", "status": "ok", "calibration": cal, "repeat": rep,
                            "sweep": {"id": sweep, "job": job}, "results": results,
                            "machine": {"other_cpu_share": share, "repro_cpu_s": 0.0}})
                job += 1
    return out


def test_components_are_recovered():
    rng = np.random.default_rng(1)
    s = noise.summarise(_records(rng, 60, 5, shared=0.04, own=0.03, sampling=0.012, load=0.25))
    parts = s.components
    own = math.hypot(0.03, 0.25 * 0.4 / math.sqrt(12))  # the load's share is each run's own, too
    assert parts.rounds == 300 and parts.dof == 240
    assert parts.shared_sd == pytest.approx(0.04, rel=0.2)
    assert parts.independent_sd == pytest.approx(own, rel=0.15)
    assert s.paired_noise == pytest.approx(own * math.sqrt(2), rel=0.15)
    assert s.noise == pytest.approx(math.hypot(0.04, own), rel=0.15)
    assert parts.rho == pytest.approx(0.04 ** 2 / (0.04 ** 2 + own ** 2), abs=0.15)
    assert s.sampling_sd == pytest.approx(0.012) and s.sampling_runs == 600
    load = s.correlation["other_cpu_share"]
    assert load.n == 600 and load.lo > 0.1 and load.lo < load.r < load.hi
    assert s.correlation["repro_cpu_s"] is None  # constant: no correlation to give
    assert s.unit == "paired" and s.unit_noise == s.paired_noise
    assert s.floor_normal["5"] == pytest.approx(V.resolvable_gap(s.paired_noise, 5, paired=True))
    # the floor is the verdict's own test on resampled ratios: at 3 rounds nothing is trimmed, and
    # on normal noise it is the normal figure; trimming one round of five from each end costs
    assert s.floor_from == "resampled" and s.floor["3"] == pytest.approx(s.floor_normal["3"], rel=0.1)
    assert s.floor["5"] > s.floor_normal["5"]
    assert s.floor["10"] < s.floor["5"] < s.floor["3"]
    json.dumps(s.as_dict(), allow_nan=False)  # stored in the calibration record as it is


def test_pairing_removes_the_shared_part_welch_keeps():
    rng = np.random.default_rng(2)
    s = noise.summarise(_records(rng, 40, 5, shared=0.06, own=0.01))
    assert s.paired_noise < 0.5 * s.noise
    assert s.components.shared_sd > 3 * s.components.independent_sd


def test_order_effect_is_found_and_its_absence_contains_zero():
    rng = np.random.default_rng(3)
    (p,) = noise.summarise(_records(rng, 30, 4, shared=0.01, own=0.01, position=0.03)).order
    assert p.position == 1 and p.n == 120 and p.lo < math.log(1.03) < p.hi and p.lo > 0
    (q,) = noise.summarise(_records(rng, 30, 4, shared=0.01, own=0.01)).order
    assert q.lo < 0 < q.hi
    # older records: no repeat.position; the job order within a round stands for it, and says so
    old = _records(rng, 10, 2, shared=0.01, own=0.01, position=0.05)
    for r in old:
        del r["repeat"]["position"]
    s = noise.summarise(old)
    assert s.order_from == "job order" and s.order[0].mean > 0
    assert any("positions from job order" in line for line in noise.lines(s, "h"))
    # the A B, B A serpentine of older calibrations: the position effect lands on one label
    serp = _records(rng, 10, 2, shared=0.01, own=0.005)
    for r in serp:
        k, label = r["repeat"]["index"], r["calibration"]["label"]
        r["repeat"]["position"] = (label == "B") if k % 2 == 0 else (label == "A")
        if r["repeat"]["position"] and label == "B":
            r["results"]["steady_median_s"] *= 0.95
    e = noise.summarise(serp).label_effect
    assert e.labels == ["A", "B"] and e.n == 20 and e.hi < 0


def test_false_verdicts_and_the_gap_power_with_wilson_intervals():
    rng = np.random.default_rng(4)
    aa = noise.summarise(_records(rng, 20, 5, shared=0.02, own=0.02))
    f = aa.false
    assert f.n == 20 and f.k == aa.false_verdicts and f.lo <= f.rate <= f.hi
    assert sum(aa.outcomes.values()) == 20
    g = noise.summarise(_records(rng, 12, 10, shared=0.02, own=0.01, gap=0.3, auto=10, sweep="g")).gap
    assert g.gap == 0.3 and g.trials == 12 and g.power.k == 12 and g.wrong.k == 0
    assert g.rounds_median == 3 and g.rounds_range[0] == 3  # most decided at the first planned look
    assert g.wrong.hi == pytest.approx(noise.wilson(0, 12)[1]) and g.wrong.lo == 0
    wrong = noise.summarise(_records(rng, 8, 5, shared=0.0, own=0.005, gap=-0.2, sweep="w")).gap
    assert wrong.wrong.k == 8 and wrong.power.k == 0


def test_wilson_interval():
    assert noise.wilson(0, 20) == pytest.approx((0.0, 0.1611), abs=1e-4)
    lo, hi = noise.wilson(10, 20)
    assert lo == pytest.approx(0.2993, abs=1e-4) and hi == pytest.approx(0.7007, abs=1e-4)
    assert noise.wilson(0, 0) == (0.0, 1.0)


def test_calibrate_prints_every_finding_and_tolerates_old_or_failed_records():
    rng = np.random.default_rng(5)
    records = _records(rng, 6, 3, shared=0.02, own=0.02, sampling=0.01)  # 18 ratios: too few to resample
    s = calibrate.summarise(records, 3)
    assert s.repeats == 3 and s.trials == 6
    text = "\n".join(calibrate.lines(s, "host1"))
    for words in ("run-to-run noise: ", "paired noise: ", "shared by a round", "independent per run",
                  "sampling sd of a run's steady median: 1.00 %", "other processes' CPU share r = ",
                  "order: position 1 over position 0: ", "false verdicts: ", "smallest gap resolved",
                  "paired rounds, normal approximation", "robust spread: ", "slow processes: "):
        assert words in text, words
    # records of an older version: no position, sd, machine fields; one failed run
    for r in records:
        r["repeat"].pop("position"), r["results"].pop("steady_median_sd_s"), r.pop("machine")
    records[0]["status"] = "failed"
    old = "\n".join(calibrate.lines(calibrate.summarise(records, 3), "host1"))
    assert "not recorded" in old and "nan" not in old
    # a config that always fails: nothing to measure, said in words, no floor
    for r in records:
        r["status"] = "failed"
    dead = calibrate.summarise(records, 3)
    assert dead.floor == {} and dead.noise is None
    assert "nan" not in "\n".join(calibrate.lines(dead, "h")) and "not measured" in calibrate.lines(dead, "h")[0]


def test_rounds_are_a_whole_number_whatever_the_trials_ran():
    # an even count of trials of unequal length: the median is a half, and the record's schema
    # (ledger/schema.py: rounds is an integer) refused the whole calibration record
    rng = np.random.default_rng(8)
    records = [r for r in _records(rng, 2, 3, shared=0.01, own=0.01)
               if not (r["calibration"]["trial"] == 0 and r["repeat"]["index"] == 2)]
    s = noise.summarise(records)
    assert s.rounds == 2 and isinstance(s.rounds, int)


def test_an_auto_trial_stops_on_the_paired_verdict_at_a_planned_look_and_says_it_is_auto():
    # calibrate's auto trials are judged as run.repeats=auto judges a pair: paired over the
    # rounds, at the planned looks (3, 5, ...), by the stopping rule and the summary alike
    from types import SimpleNamespace

    from repro.preflight import plan

    config = plan(["framework=jax", "model=mlp", "verdict.max_repeats=5"]).jobs[0]
    args = SimpleNamespace(trials=2, gap=0.05, auto=True, repeats=2, order="crossover")
    trials = calibrate.Trials(config, [], args, SimpleNamespace(sweep_id="s"))
    (a, b) = trials.round(0)
    assert a.fields["repeat"]["auto"] == {"max": 5, "band": config.verdict.band, "budget_s": None}
    assert b.fields["calibration"] == {"trial": 0, "label": "B", "gap": 0.05}
    # a round-shared part far above each run's own: pairing decides a 5 % gap at the first look,
    # an unpaired (Welch) test on the same medians cannot
    rng = np.random.default_rng(7)
    recs = _records(rng, 1, 3, shared=0.2, own=0.002, gap=0.05, auto=5)
    assert calibrate._decided(recs, 0, 3, 5)
    assert not calibrate._decided(recs, 0, 2, 5) and not calibrate._decided(recs[:4], 0, 2, 5)  # no look at 2
    sides = [V.Side(x, tuple(r["results"]["steady_median_s"] for r in recs if r["calibration"]["label"] == x))
             for x in "AB"]
    assert not V.judge(*sides, alpha=V.spending(5)[3]).decided  # Welch on the same runs
    s = noise.summarise(recs)
    assert s.gap.power.k == 1 and s.gap.rounds_median == 3


def test_a_gap_with_given_rounds_runs_fixed_trials_and_a_gap_alone_auto_ones():
    # calibrate --gap G --repeats R: the power of a fixed run.repeats=R at that gap (one look at
    # alpha over R rounds); --gap G alone: auto trials; both: refused, naming the flags
    from types import SimpleNamespace

    from repro.cli import build_parser
    from repro.config import ConfigError

    parse = build_parser()[0].parse_args
    fixed = parse(["calibrate", "--gap", "0.05", "--repeats", "5", "framework=jax", "model=mlp"])
    config = calibrate._plan(fixed).jobs[0]
    trials = calibrate.Trials(config, [], fixed, SimpleNamespace(sweep_id="s"))
    assert trials.auto is False and trials.per_trial == 5 and trials.max_rounds == 20 * 5
    (a, b) = trials.round(0)
    assert "auto" not in a.fields["repeat"] and b.fields["calibration"]["gap"] == 0.05
    auto = parse(["calibrate", "--gap", "0.05", "framework=jax", "model=mlp", "verdict.max_repeats=7"])
    trials = calibrate.Trials(calibrate._plan(auto).jobs[0], [], auto, SimpleNamespace(sweep_id="s"))
    assert trials.auto is True and trials.per_trial == 7
    with pytest.raises(ConfigError, match="--repeats=5 with --auto: give one"):
        calibrate._plan(parse(["calibrate", "--gap", "0.05", "--auto", "--repeats", "5"]))


def test_an_auto_trial_is_judged_at_its_looks_not_at_one_look_over_all_rounds():
    # the same five rounds: one look at alpha = 0.05 calls them faster, the looks (0.018 after 3,
    # 0.032 after 5) do not: an A/A trial's verdict is the auto sweep's, not a fixed-n verdict
    # (verdict.trim=0: the plain paired t, whose p these ratios were chosen for)
    d = [0.030, 0.042, 0.002, 0.048, 0.013]  # within-round log ratios B/A: paired t 3.12 at df 4, p 0.035
    recs = []
    for k, x in enumerate(d):
        for label, m in (("A", 1e-3), ("B", 1e-3 * math.exp(x))):
            recs.append({"id": f"{k}{label}", "status": "ok", "calibration": {"trial": 0, "label": label},
                         "config": {"verdict": {"trim": 0}},
                         "repeat": {"index": k, "position": label == "B", "count": 5, "group": f"s/{label}"},
                         "sweep": {"id": "s", "job": 2 * k + (label == "B")}, "results": {"steady_median_s": m}})
    fixed = noise.summarise(recs)
    for r in recs:
        r["repeat"]["auto"] = {"max": 5, "band": 0.02, "budget_s": None}
    auto = noise.summarise(recs)
    assert fixed.false_verdicts == 1 and auto.false_verdicts == 0


def test_a_part_shared_by_a_labels_runs_within_a_trial_is_found_between_trials():
    # rounds alone: the trials' means spread as their rounds predict; add a per-(trial, label)
    # offset (sd 2 %) and the F test finds it, its sd recovered roughly
    rng = np.random.default_rng(11)
    plain = _records(rng, 60, 5, shared=0.01, own=0.01)
    shifted = _records(rng, 60, 5, shared=0.01, own=0.01, sweep="t")
    offset = {t: math.exp(rng.normal(0, 0.02)) for t in range(60)}
    for r in shifted:
        if r["calibration"]["label"] == "B":
            r["results"]["steady_median_s"] *= offset[r["calibration"]["trial"]]
    calm, moved = noise.summarise(plain).between_trials, noise.summarise(shifted).between_trials
    assert calm.trials == 60 and calm.p > 0.01 and calm.f < 1.6
    assert moved.p < 1e-6 and moved.f > 3 and 0.012 < moved.tau < 0.03
    line = next(x for x in noise.lines(dataclasses.replace(noise.summarise(shifted), repeats=5), "h") if x.startswith("between"))
    assert "more rounds of one sweep do not average" in line and f"{100 * moved.tau:.2f} %" in line
