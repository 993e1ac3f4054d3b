"""How often the verdict engine (repro/report/verdict.py) is wrong, and how often it finds a real gap.

    .venv/bin/python benchmarks/verdict_calibration.py                 # the simulation (a couple of minutes)
    .venv/bin/python benchmarks/verdict_calibration.py --trials 1000   # tighter rates
    .venv/bin/python benchmarks/verdict_calibration.py --real 20       # + a real A/A: `repro calibrate` (minutes)
    .venv/bin/python benchmarks/verdict_calibration.py --only-statistics --statistics 20000   # issue 61's table alone

Simulation: two configs A and B run as a sweep runs them: rounds, each running A and B once in
a fresh random order (or, for comparison, the old fixed serpentine A B, B A, ...). A run's
steady median = base × (1 + gap on B) × exp(round-shared part + its own part) × the effects of
the noise model below. Noise models:
- clean paired (issue 61): 2 % own noise and a 3 % position effect, the run first in its round 3 %
  slower (random order: it falls on A or B by a coin), as on a dedicated machine or a GPU;
- independent: lognormal run-to-run noise of 2 % and 5 % (sigma of the log), nothing shared;
- round-shared: 4 % shared by the two runs of a round (drift, a neighbour) + 1.5 % or 3 % each
  run's own;
- drift: 3 % own noise and the machine slowing 10 % linearly across a 10-round sweep;
- periodic position: 3 % own noise, and the run in slot 1 of every 4 runs 5 % faster (the
  A B B A blocks of an A/A that made label B faster), in the serpentine order and in random order;
- unequal noise: A 2 %, B 6 % (one framework 3× noisier);
- slow processes (issue 48): 2.5 % own noise and one process in ten 60 % slower for its whole
  life, nothing flagged (what a shared 2-core VM showed for JAX's processes);
- outliers: 3 % own noise, one run in ten 30 % slower; telemetry flags runs (another process
  in the window, a low clock), either independently of their time (10 % of runs) or mostly the
  outliers (90 % of outliers, 5 % of other runs); without and with the outcome-blind rerun rule
  (a round with a flagged run is run again, decided before its times are read, at most 2
  reruns per sweep).

Each model is judged on the same simulated sweeps by the old statistic (`verdict.statistic=trimmed`:
the trimmed paired t at verdict.trim, Yuen's trimmed t unpaired) and the new one side by side (the
default `verdict.statistic`, report/statistic.py: `--old`, `--new` choose them), paired at a
fixed 3, 5 and 10 rounds (one look at alpha) and `run.repeats=auto` (at most 10 rounds, the
planned looks after 3, 5, 7 and 10 with alpha spent across them), unpaired at 5 and auto. For
each: the A/A false "faster" rate (identical configs called faster, either way) and the power
(A correctly called faster) for true gaps of 2, 5, 10 and 20 %, auto's median rounds in brackets.
Then issue 48's own table, rerun (`--issue N` sweeps, default 5000): the slow-process model at 5
and 10 rounds, the paired t, the trimmed and adaptive statistics and Wilcoxon's signed-rank test
(scipy), A/A and the power for a 5 % gap. First, issue 61's table (`--statistics N` sweeps a cell,
default 20000, each with its 95 % Wilson interval): every registered statistic in the clean paired
and the slow-process models, A/A and the power for a 5 % gap at a fixed 3, 5 and 10 rounds (one
look at alpha, each sweep judged by the statistic's `rows`, the engine's own numbers), and auto
(the planned looks through `decide_family`, `--auto N` sweeps, default 2000).
Targets (issue 61): A/A <= 5 % in every model; clean paired, a 5 % gap: power >= 45 % at 5 rounds
and >= 90 % at 10; slow processes: >= 55 % at 10.
Targets: A/A false "faster" <= 5 % everywhere; with auto, power >= 80 % for a 5 % gap at this
machine's noise (`repro calibrate` measures it) at a median cost no more than fixed 5 rounds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time

import numpy as np

from repro.report import statistic as S
from repro.report import verdict as V
from repro.report.noise import wilson

GAPS = (0.0, 0.02, 0.05, 0.10, 0.20)
MAX, FIXED = 10, 5
MAX_RERUNS = 2
OLD = "trimmed"  # verdict.statistic of issue 48 to 61: the trimmed paired t at verdict.trim
CLEAN = "clean paired: own 2 %, position +3 % (issue 61)"
SLOW = "slow processes: own 2.5 %, 10 % of processes +60 % (issue 48)"


def analyses(old: str, new: str) -> tuple:
    """(analysis, rounds (None: auto), verdict.statistic): the old test and the new one side by side."""
    return tuple((x, n, stat) for x, ns in (("paired", (3, 5, 10, None)), ("Welch", (5, None)))
                 for n in ns for stat in (old, new))


def models(machine_sigma: float | None) -> dict[str, dict]:
    out = {
        CLEAN: {"own": 0.02, "first": 0.03},
        "independent 2 % (the quiet target)": {"own": 0.02},
        "independent 5 %": {"own": 0.05},
        "round-shared 4 % + own 1.5 %": {"shared": 0.04, "own": 0.015},
        "round-shared 4 % + own 3 %": {"shared": 0.04, "own": 0.03},
        "drift +10 % over the sweep, own 3 %": {"own": 0.03, "drift": 0.10},
        "position -5 % in slot 1 of 4, serpentine": {"own": 0.03, "slot": -0.05, "serpentine": True},
        "position -5 % in slot 1 of 4, random order": {"own": 0.03, "slot": -0.05},
        "unequal: A 2 %, B 6 %": {"own": 0.02, "own_b": 0.06},
        SLOW: {"own": 0.025, "outlier_p": 0.1, "slow": 0.6},
        "outliers, flags independent": {"own": 0.03, "outlier_p": 0.1, "flag": (0.1, 0.1)},
        "outliers, flags independent, reruns": {"own": 0.03, "outlier_p": 0.1, "flag": (0.1, 0.1), "rerun": True},
        "outliers, flags mostly outliers": {"own": 0.03, "outlier_p": 0.1, "flag": (0.05, 0.9)},
        "outliers, flags mostly outliers, reruns": {"own": 0.03, "outlier_p": 0.1, "flag": (0.05, 0.9), "rerun": True},
    }
    if machine_sigma:
        out[f"this machine ({machine_sigma:.1%} own, repro calibrate)"] = {"own": machine_sigma}
    return out


def sweep(rng: np.random.Generator, model: dict, gap: float) -> tuple[list[float], list[float]]:
    """MAX rounds of A and B run medians (round i: a[i], b[i]) as the sweep ran them, with the
    outcome-blind reruns of the model applied round by round."""
    a, b, slot, reruns = [], [], 0, 0
    k = 0
    while k < MAX:
        order = ("a", "b") if model.get("serpentine") and k % 2 == 0 else ("b", "a") if model.get("serpentine") \
            else tuple(rng.permutation(["a", "b"]))
        shared = rng.normal(0, model.get("shared", 0.0))
        times, flagged = {}, False
        for place, side in enumerate(order):
            own = model.get("own_b", model["own"]) if side == "b" else model["own"]
            t = np.exp(shared + rng.normal(0, own)) * (1 + model.get("drift", 0) * k / MAX)
            t *= 1 + model.get("first", 0.0) if place == 0 else 1.0
            if slot % 4 == 1:
                t *= 1 + model.get("slot", 0.0)
            outlier = rng.random() < model.get("outlier_p", 0.0)
            t *= 1 + model.get("slow", 0.3) if outlier else 1.0
            clean, dirty = model.get("flag", (0.0, 0.0))
            flagged |= bool(rng.random() < (dirty if outlier else clean))
            times[side] = t * (1 + gap if side == "b" else 1)
            slot += 1
        if flagged and model.get("rerun") and reruns < MAX_RERUNS:
            reruns += 1  # decided by telemetry, before the round's times are read: run it again
            continue
        a.append(float(times["a"]))
        b.append(float(times["b"]))
        k += 1
    return a, b


def judged(a: list[float], b: list[float], analysis: str, rounds: int | None, statistic: str) -> V.Verdict:
    n = rounds or MAX
    keys = tuple(range(n)) if analysis == "paired" else None
    pair = [(V.Side("A", tuple(a[:n]), rounds=keys), V.Side("B", tuple(b[:n]), rounds=keys), "")]
    (v,) = V.decide_family(pair, V.Plan(sequential=rounds is None, max_repeats=MAX, statistic=statistic))
    return v


def label(x: tuple) -> str:
    analysis, rounds, statistic = x
    return f"{statistic} ({'paired' if analysis == 'paired' else 'unpaired'}), {f'fixed {rounds}' if rounds else 'auto'}"


def simulate(trials: int, seed: int, machine_sigma: float | None, old: str = OLD, new: str = V.STATISTIC) -> list[str]:
    ways = analyses(old, new)
    rng = np.random.default_rng(seed)
    lines = [f"A/A false 'faster' rate and power ({trials} simulated sweeps per cell, seed {seed}); fixed: "
             f"{FIXED} rounds, one look; auto: at most {MAX} rounds, looks after {V.looks(MAX)} spending "
             f"{', '.join(f'{x:.4g}' for x in V.spending(MAX).values())}; [median rounds]", ""]
    lines += ["| noise model | analysis | A/A false | " + " | ".join(f"power {g:.0%}" for g in GAPS[1:]) + " |",
              "|" + "---|" * (3 + len(GAPS) - 1)]
    pooled = {x: [0, 0] for x in ways}
    wrong_way = {x: 0 for x in ways}
    for name, model in models(machine_sigma).items():
        cells = {x: [] for x in ways}
        for gap in GAPS:
            hits = {x: 0 for x in ways}
            cost = {x: [] for x in ways}
            for _ in range(trials):
                a, b = sweep(rng, model, gap)
                for x in ways:
                    v = judged(a, b, *x)
                    cost[x].append(v.n_a if v.decided else (x[1] or MAX))
                    if v.outcome == V.FASTER:
                        hits[x] += gap == 0 or v.faster == "A"
                        wrong_way[x] += gap > 0 and v.faster == "B"
            for x in ways:
                if gap == 0:
                    pooled[x][0] += hits[x]
                    pooled[x][1] += trials
                rate = hits[x] / trials
                text = f"{rate:.1%}" if gap == 0 else f"{rate:.0%}"
                cells[x].append(text + (f" [{statistics.median(cost[x]):g}]" if x[1] is None else ""))
        for x in ways:
            lines.append(f"| {name} | {label(x)} | " + " | ".join(cells[x]) + " |")
    lines += ["", f"A/A false 'faster', pooled over the {len(models(machine_sigma))} noise models (95 % Wilson interval); "
                  "verdicts in the wrong direction over all gapped sweeps:"]
    for x, (k, n) in pooled.items():
        lo, hi = wilson(k, n)
        lines.append(f"- {label(x)}: {k / n:.1%} ({lo:.1%}–{hi:.1%}, {n} sweeps); "
                     f"wrong direction: {wrong_way[x]}")
    return lines


def issue_table(trials: int, seed: int) -> list[str]:
    """Issue 48's table, rerun: its slow-process model (own 2.5 %, 10 % of processes +60 %), `trials`
    sweeps of 5 and 10 rounds, judged at one look at alpha by each registered statistic (exactly the
    engine's: its `rows`, calibrated se and df) and Wilcoxon's signed-rank test."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    out = [f"Issue 48's model (own 2.5 %, 10 % of processes +60 %), {trials} simulated sweeps per cell, seed {seed}:", "",
           "| test | A/A 'faster' (5 / 10 rounds) | power for a 5 % gap (5 / 10 rounds) |", "|---|---|---|"]
    cells: dict[str, list[str]] = {name: [] for name in S.names()} | {"Wilcoxon signed-rank": []}
    for gap in (0.0, 0.05):
        for n in (5, 10):
            runs = rng.normal(0, 0.025, (2, trials, n)) + np.log(1.6) * (rng.random((2, trials, n)) < 0.1)
            d = runs[1] + math.log1p(gap) - runs[0]  # B over A: > 0, A is faster
            for name in S.names():
                cells[name].append(f"{called(d, name, gap).mean():.1%}")
            p = stats.wilcoxon(d, axis=1).pvalue
            hit = (p <= V.ALPHA) & ((np.median(d, axis=1) > 0) | (gap == 0))
            cells["Wilcoxon signed-rank"].append(f"{hit.mean():.1%}")
    for name, c in cells.items():
        out.append(f"| {name} | {c[0]} / {c[1]} | {c[2]} / {c[3]} |")
    return out


def called(d: np.ndarray, statistic: str, gap: float, alpha: float = V.ALPHA) -> np.ndarray:
    """Each row (a sweep's within-round log ratios B/A) called faster at one look at `alpha` by the
    statistic's own rows (its calibrated se and df, as `judge` reads them): either way for an A/A,
    A faster (the right way) under a gap."""
    m, se, df, _ = S.get(statistic).rows(d)
    hit = (se > 0) & (np.abs(m) > S.critical(df, alpha) * se)
    return hit & ((m > 0) | (gap == 0))


def ratios(rng: np.random.Generator, model: str, sweeps: int, rounds: int, gap: float) -> np.ndarray:
    """`sweeps` rows of `rounds` within-round log ratios B/A in issue 61's two models, vectorised
    (the same models as `sweep`'s): clean paired (own 2 %, the run first in its round 3 % slower,
    the order a coin) and slow processes (own 2.5 %, 10 % of processes +60 %)."""
    if model == CLEAN:
        own = rng.normal(0, 0.02, (2, sweeps, rounds))
        first = np.where(rng.random((sweeps, rounds)) < 0.5, 1.0, -1.0) * math.log(1.03)  # +: B ran first
        return own[1] - own[0] + first + math.log1p(gap)
    runs = rng.normal(0, 0.025, (2, sweeps, rounds)) + math.log(1.6) * (rng.random((2, sweeps, rounds)) < 0.1)
    return runs[1] - runs[0] + math.log1p(gap)


def statistics_table(trials: int, auto_trials: int, seed: int) -> list[str]:
    """Issue 61's table: every registered statistic in the clean paired and slow-process models, A/A
    and the power for a 5 % gap at a fixed 3, 5 and 10 rounds (one look) and auto (the planned looks),
    each rate with its 95 % Wilson interval."""
    rng = np.random.default_rng(seed)
    head = ["A/A 3", "A/A 5", "A/A 10", "A/A auto", "power 3", "power 5", "power 10", "power auto [median rounds]"]
    out = [f"Issue 61's table: {trials} simulated sweeps a fixed cell, {auto_trials} an auto cell, seed {seed}; "
           "rate (95 % Wilson interval); a 5 % gap; auto: looks after 3, 5, 7, 10", "",
           "| model | statistic | " + " | ".join(head) + " |", "|" + "---|" * (2 + len(head))]
    for model in (CLEAN, SLOW):
        rows: dict[str, list[str]] = {name: [] for name in S.names()}
        for gap in (0.0, 0.05):
            fixed = {n: ratios(rng, model, trials, n, gap) for n in (3, 5, 10)}
            sweeps = ratios(rng, model, auto_trials, MAX, gap)
            for name in S.names():
                for n, d in fixed.items():
                    k = int(called(d, name, gap).sum())
                    lo, hi = wilson(k, trials)
                    rows[name].append(f"{k / trials:.1%} ({lo:.1%}–{hi:.1%})")
                hits, used = 0, []
                for row in sweeps:
                    keys = tuple(range(MAX))
                    pair = [(V.Side("A", (1.0,) * MAX, rounds=keys), V.Side("B", tuple(np.exp(row)), rounds=keys), "")]
                    (v,) = V.decide_family(pair, V.Plan(sequential=True, max_repeats=MAX, statistic=name))
                    hits += v.outcome == V.FASTER and (gap == 0 or v.faster == "A")
                    used.append(v.n_a if v.decided else MAX)
                lo, hi = wilson(hits, auto_trials)
                rows[name].append(f"{hits / auto_trials:.1%} ({lo:.1%}–{hi:.1%})" +
                                  (f" [{statistics.median(used):g}]" if gap else ""))
        for name, cells in rows.items():
            out.append(f"| {model} | {name}{' (default)' if name == V.STATISTIC else ''} | " + " | ".join(cells) + " |")
    return out


def real(trials: int, overrides: list[str]) -> float | None:
    """A real A/A through `repro calibrate`; the machine's run-to-run noise it printed."""
    cmd = [sys.executable, "-m", "repro", "calibrate", f"--trials={trials}", *overrides]
    print("$ " + " ".join(cmd[1:]), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout + proc.stderr)
    print(f"({time.monotonic() - start:.0f} s)")
    for line in proc.stdout.splitlines():
        if line.startswith("run-to-run noise:") and "%" in line:
            return float(line.split(":")[1].split("%")[0]) / 100
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--real", type=int, default=0, help="trials of a real A/A (repro calibrate); 0: none")
    p.add_argument("--sigma", type=float, default=None, help="this machine's run-to-run noise (else --real's)")
    p.add_argument("--old", default=OLD, choices=S.names(), help=f"the old statistic (default {OLD})")
    p.add_argument("--new", default=V.STATISTIC, choices=S.names(), help=f"the new statistic (default {V.STATISTIC})")
    p.add_argument("--issue", type=int, default=5000, help="sweeps per cell of issue 48's table (0: not run)")
    p.add_argument("--statistics", type=int, default=20000, help="sweeps per fixed cell of issue 61's table (0: not run)")
    p.add_argument("--auto", type=int, default=2000, help="sweeps per auto cell of issue 61's table")
    p.add_argument("--only-issue", action="store_true", help="issue 48's table alone")
    p.add_argument("--only-statistics", action="store_true", help="issue 61's table alone")
    p.add_argument("overrides", nargs="*", default=["framework=jax", "model=mlp", "model.preset=tiny"])
    args = p.parse_args()
    sigma = args.sigma
    if args.real:
        sigma = real(args.real, args.overrides) or sigma
    start = time.monotonic()
    if args.statistics:
        print("\n".join(statistics_table(args.statistics, args.auto, args.seed)) + "\n", flush=True)
    if args.issue and not args.only_statistics:
        print("\n".join(issue_table(args.issue, args.seed)) + "\n", flush=True)
    if not args.only_issue and not args.only_statistics:
        print("\n".join(simulate(args.trials, args.seed, sigma, args.old, args.new)))
    print(f"\n({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
