"""How often a noisy bisection names the wrong culprit, and what it costs: `repro bisect`'s decide + search, simulated.

    .venv/bin/python benchmarks/bisect_simulation.py                # 40 a cell: ~1 min idle, 5.5 min at load 20
    .venv/bin/python benchmarks/bisect_simulation.py --trials 100   # the figures search.py quotes (~2.5x longer)
    .venv/bin/python benchmarks/bisect_simulation.py --cap 20 --regressions 0.05   # small gaps, more rounds per call

Each simulated bisection runs the exact code of `repro bisect` (src/repro/bisect/decide.py and
search.py) on simulated steady medians:
1. n candidates between GOOD and BAD (positions 0..n), the culprit k drawn uniformly from 1..n:
   position p is truly bad (slower by the regression) iff p >= k;
2. confirm: GOOD and BAD in paired rounds (decide.confirm) at the planned looks after 3, 5, 7 and
   10 rounds (the cap); a bisection whose gap is not confirmed is "refused" (for a real regression
   that is a miss);
3. probes: search.Search (DEFAULT_RATES, threshold 0.95) picks a position, decide.classify compares
   it with GOOD in paired rounds (same looks, same cap) against the confirmed gap, and the call
   updates the posterior; until the search decides, has nothing left worth probing, or the probe
   budget (2 ceil(log2 n) + 2) is spent.
Rounds come from benchmarks/verdict_calibration.py's sweep generator (imported: the same noise
models as the verdict engine's calibration), each round running GOOD and the other side once in a
fresh random order:
- clean paired: 2 % own run-to-run noise and a 3 % position effect (the run in slot 1 of every 4
  is 3 % slower);
- slow processes (issue 48): 2.5 % own noise, one process in ten 60 % slower for its whole life.

Printed: per regression (5, 10, 30 %) × candidates (8, 16, 64) × noise model: the share refused
(gap not confirmed), the false-culprit rate (a wrong position named, over the bisections that ran),
the undecided rate (no position named: budget spent, nothing left to probe, or a non-monotone
history), the median probes and the median runs (two per paired round, the confirmation's
included) over the bisections that ran; then each probe's error rates among its calls (truly good
called like-bad, truly bad called like-good; 95 % Wilson intervals), from which
search.DEFAULT_RATES is set; then the A/A: identical endpoints, the share refused, which must be
>= 95 %. The default --trials is small so that the run fits in a few minutes on a shared 2-core
machine: its rates are good to a few percent; --trials 100 for the figures quoted in search.py.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import verdict_calibration as VC  # benchmarks/verdict_calibration.py: this script's folder is on sys.path when it runs

from repro.bisect import decide as D
from repro.bisect.search import DEFAULT_RATES, Probe, Rates, Search
from repro.report.noise import wilson

REGRESSIONS = (0.05, 0.10, 0.30)
CANDIDATES = (8, 16, 64)
CAP = VC.MAX  # paired rounds at most per call (the verdict engine's max_repeats; the sweep generator's rounds)


def noise_models() -> dict[str, dict]:
    slow = next(m for name, m in VC.models(None).items() if name.startswith("slow processes"))
    return {"clean paired: own 2 %, position +3 %": {"own": 0.02, "slot": 0.03},
            "slow processes: own 2.5 %, 1 in 10 +60 %": slow}


def measured(rng: np.random.Generator, model: dict, gap: float, call, cap: int = CAP) -> tuple[D.Call, int]:
    """A call made as the driver makes it: rounds up to each planned look, called at each, until
    one is final (`call(good, other, max_rounds)`); (the call, the paired rounds run). A cap past
    the generator's 10 rounds takes them from further sweeps of the same model."""
    a, b = [], []
    while len(a) < cap:
        more = VC.sweep(rng, model, gap)
        a, b = a + more[0], b + more[1]
    for k in D.looks(cap):
        c = call(a[:k], b[:k], cap)
        if not c.more:
            return c, k
    raise AssertionError("the cap's call is final")  # pragma: no cover


def budget(n: int) -> int:
    return 2 * math.ceil(math.log2(n)) + 2 if n > 1 else 0


def bisection(rng: np.random.Generator, model: dict, regression: float, n: int, tally: dict,
              alpha: float = D.PROBE_ALPHA, rates: Rates = DEFAULT_RATES, cap: int = CAP) -> dict:
    """One simulated bisection: its outcome ("refused", "right", "wrong", "undecided"), probes, runs."""
    k = int(rng.integers(1, n + 1))
    conf, rounds = measured(rng, model, regression, lambda g, x, m: D.confirm(g, x, max_rounds=m), cap)
    runs = 2 * rounds
    if conf.outcome != D.REPRODUCES:
        return {"outcome": "refused", "probes": 0, "runs": runs}
    gap = conf.ratio - 1
    search = Search(n, rates)
    probes = 0
    while probes < budget(n) and (p := search.next()) is not None:
        truly_bad = p >= k
        c, rounds = measured(rng, model, regression if truly_bad else 0.0,
                             lambda g, x, m: D.classify(g, x, gap, alpha, max_rounds=m), cap)
        search.update(Probe(p, c.outcome, c.ratio, c.lo, c.hi, c.rounds))
        tally["bad" if truly_bad else "good"][c.outcome] += 1
        probes += 1
        runs += 2 * rounds
    d = search.decided()
    outcome = "undecided" if d is None else "right" if d[0] == k else "wrong"
    return {"outcome": outcome, "probes": probes, "runs": runs, "nonmonotone": search.nonmonotone() is not None}


def pct(k: int, n: int) -> str:
    return f"{k / n:.1%}" if n else "–"


def simulate(trials: int, seed: int, alpha: float = D.PROBE_ALPHA, rates: Rates = DEFAULT_RATES, cap: int = CAP,
             regressions: tuple[float, ...] = REGRESSIONS) -> list[str]:
    rng = np.random.default_rng(seed)
    tallies: dict[tuple[float, str], dict] = {}
    lines = [f"Simulated bisections ({trials} per cell, seed {seed}): confirm, then probes until decided, nothing "
             f"left to probe, or 2 ceil(log2 n) + 2 probes; looks after {D.looks(cap)} rounds; "
             f"probes' alpha {alpha:g}; search rates {rates}; rates over the bisections that ran "
             "(refused: over all)", "",
             "| regression | candidates | noise model | refused | false culprit | undecided (non-monotone) | "
             "median probes | median runs |", "|---|---|---|---|---|---|---|---|"]
    for regression in regressions:
        for n in CANDIDATES:
            for name, model in noise_models().items():
                blank = {t: {o: 0 for o in ("good", "bad", "unknown")} for t in ("good", "bad")}
                tally = tallies.setdefault((regression, name), blank)
                got = [bisection(rng, model, regression, n, tally, alpha, rates, cap) for _ in range(trials)]
                ran = [g for g in got if g["outcome"] != "refused"]
                count = lambda o: sum(g["outcome"] == o for g in got)  # noqa: E731
                mono = sum(g.get("nonmonotone", False) for g in ran)
                med = lambda key: f"{statistics.median(g[key] for g in ran):g}" if ran else "–"  # noqa: E731
                lines.append(f"| {regression:.0%} | {n} | {name} | {pct(count('refused'), len(got))} | "
                             f"{pct(count('wrong'), len(ran))} | {pct(count('undecided'), len(ran))} ({mono}) | "
                             f"{med('probes')} | {med('runs')} |")
    return lines + rates_table(tallies, rates)


def rates_table(tallies: dict, rates: Rates) -> list[str]:
    """Each probe's error rates among the calls made, per regression and noise model and pooled,
    with 95 % Wilson intervals; the largest upper bound of any cell is what DEFAULT_RATES rounds up."""
    lines = ["", "Probe error rates among calls made (95 % Wilson interval), and the share of probes left unknown:"]
    pooled = {"false_bad": [0, 0], "false_good": [0, 0]}
    worst = {"false_bad": 0.0, "false_good": 0.0}
    for (regression, name), t in tallies.items():
        g, b = t["good"], t["bad"]
        cells = {"false_bad": (g["bad"], g["good"] + g["bad"]), "false_good": (b["good"], b["good"] + b["bad"])}
        text = []
        for key, (k, n) in cells.items():
            lo, hi = wilson(k, n) if n else (0.0, 1.0)
            pooled[key][0] += k
            pooled[key][1] += n
            worst[key] = max(worst[key], hi if n else 0.0)
            text.append(f"{key} {k}/{n} = {pct(k, n)} ({lo:.1%}–{hi:.1%})")
        unknown = pct(g["unknown"] + b["unknown"], sum(g.values()) + sum(b.values()))
        lines.append(f"- {regression:.0%}, {name}: " + "; ".join(text) + f"; unknown {unknown}")
    for key, (k, n) in pooled.items():
        lo, hi = wilson(k, n) if n else (0.0, 1.0)
        lines.append(f"- pooled {key}: {k}/{n} = {pct(k, n)} (95 % Wilson {lo:.1%}–{hi:.1%}); largest upper bound "
                     f"of a cell {worst[key]:.1%}; the search used {getattr(rates, key):g}")
    return lines


def aa(trials: int, seed: int, cap: int = CAP) -> list[str]:
    """A/A: identical endpoints, confirm only; the share refused ("does not reproduce")."""
    rng = np.random.default_rng(seed + 1)
    lines = ["", f"A/A: identical endpoints ({trials} confirmations per noise model, seed {seed + 1}); target: "
                 "refused >= 95 %"]
    for name, model in noise_models().items():
        calls = [measured(rng, model, 0.0, lambda g, x, m: D.confirm(g, x, max_rounds=m), cap) for _ in range(trials)]
        refused = sum(c.outcome == D.NOT_REPRODUCED for c, _ in calls)
        lo, hi = wilson(refused, trials)
        lines.append(f"- {name}: refused {refused}/{trials} = {refused / trials:.1%} "
                     f"(95 % Wilson {lo:.1%}–{hi:.1%}), "
                     f"median runs {statistics.median(2 * r for _, r in calls):g}"
                     + ("" if refused / trials >= 0.95 else "  ← BELOW the 95 % target"))
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=40, help="bisections per cell (default 40: a few minutes; 100 for the "
                                                          "figures search.py quotes)")
    p.add_argument("--aa", type=int, default=None, help="A/A confirmations per noise model (default 10 × trials)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--probe-alpha", type=float, default=D.PROBE_ALPHA, help="decide.classify's alpha "
                   f"(default decide.PROBE_ALPHA, {D.PROBE_ALPHA})")
    p.add_argument("--rates", type=float, nargs=2, metavar=("FALSE_BAD", "FALSE_GOOD"),
                   default=(DEFAULT_RATES.false_bad, DEFAULT_RATES.false_good),
                   help="the search's error rates (default search.DEFAULT_RATES)")
    p.add_argument("--cap", type=int, default=CAP, help=f"paired rounds at most per call (default {CAP})")
    p.add_argument("--regressions", type=float, nargs="+", default=REGRESSIONS, help="the regressions simulated "
                   "(default 0.05 0.10 0.30)")
    args = p.parse_args()
    if args.trials < 1 or (args.aa is not None and args.aa < 1):
        p.error("--trials and --aa must be at least 1")
    try:
        rates = Rates(*args.rates)
    except ValueError as e:
        p.error(f"--rates: {e}")
    if args.cap < 2 or any(not 0 < r < 10 for r in args.regressions):
        p.error("--cap must be at least 2 and each --regressions value in (0, 10) (0.05: 5 % slower)")
    if not 0 < args.probe_alpha < 0.5:
        p.error(f"--probe-alpha {args.probe_alpha} must be in (0, 0.5)")
    start = time.monotonic()
    print("\n".join(simulate(args.trials, args.seed, args.probe_alpha, rates, args.cap,
                                tuple(args.regressions))), flush=True)
    print("\n".join(aa(args.aa or 10 * args.trials, args.seed, args.cap)))
    print(f"\n({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
