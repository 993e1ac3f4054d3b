"""How often the verdict engine (repro/report/verdict.py) is wrong, and how often it finds a real gap.

    .venv/bin/python benchmarks/verdict_calibration.py                 # the simulation (a couple of minutes)
    .venv/bin/python benchmarks/verdict_calibration.py --trials 1000   # tighter rates
    .venv/bin/python benchmarks/verdict_calibration.py --real 20       # + a real A/A: `repro calibrate` (minutes)

Simulation: two configs A and B run as a sweep runs them: rounds, each running A and B once in
a fresh random order (or, for comparison, the old fixed serpentine A B, B A, ...). A run's
steady median = base × (1 + gap on B) × exp(round-shared part + its own part) × the effects of
the noise model below. Noise models:
- independent: lognormal run-to-run noise of 2 % and 5 % (sigma of the log), nothing shared;
- round-shared: 4 % shared by the two runs of a round (drift, a neighbour) + 1.5 % or 3 % each
  run's own;
- drift: 3 % own noise and the machine slowing 10 % linearly across a 10-round sweep;
- periodic position: 3 % own noise, and the run in slot 1 of every 4 runs 5 % faster (the
  A B B A blocks of an A/A that made label B faster), in the serpentine order and in random order;
- unequal noise: A 2 %, B 6 % (one framework 3× noisier);
- outliers: 3 % own noise, one run in ten 30 % slower; telemetry flags runs (another process
  in the window, a low clock), either independently of their time (10 % of runs) or mostly the
  outliers (90 % of outliers, 5 % of other runs); without and with the outcome-blind rerun rule
  (a round with a flagged run is run again, decided before its times are read, at most 2
  reruns per sweep).

Each model is judged four ways on the same simulated sweeps: Welch on run medians or the paired t
on within-round log ratios, at a fixed 5 rounds (one look at alpha) or `run.repeats=auto`
(at most 10 rounds, the planned looks after 3, 5, 7 and 10 with alpha spent across them). For
each: the A/A false "faster" rate (identical configs called faster, either way) and the power
(A correctly called faster) for true gaps of 2, 5, 10 and 20 %, auto's median rounds in brackets.
Targets: A/A false "faster" <= 5 % everywhere; with auto, power >= 80 % for a 5 % gap at this
machine's noise (`repro calibrate` measures it) at a median cost no more than fixed 5 rounds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from repro.report import verdict as V
from repro.report.noise import wilson

GAPS = (0.0, 0.02, 0.05, 0.10, 0.20)
MAX, FIXED = 10, 5
MAX_RERUNS = 2
ANALYSES = (("Welch", 5), ("paired", 5), ("Welch", None), ("paired", None))  # (analysis, rounds; None: auto)


def models(machine_sigma: float | None) -> dict[str, dict]:
    out = {
        "independent 2 % (the quiet target)": {"own": 0.02},
        "independent 5 %": {"own": 0.05},
        "round-shared 4 % + own 1.5 %": {"shared": 0.04, "own": 0.015},
        "round-shared 4 % + own 3 %": {"shared": 0.04, "own": 0.03},
        "drift +10 % over the sweep, own 3 %": {"own": 0.03, "drift": 0.10},
        "position -5 % in slot 1 of 4, serpentine": {"own": 0.03, "slot": -0.05, "serpentine": True},
        "position -5 % in slot 1 of 4, random order": {"own": 0.03, "slot": -0.05},
        "unequal: A 2 %, B 6 %": {"own": 0.02, "own_b": 0.06},
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
        for side in order:
            own = model.get("own_b", model["own"]) if side == "b" else model["own"]
            t = np.exp(shared + rng.normal(0, own)) * (1 + model.get("drift", 0) * k / MAX)
            if slot % 4 == 1:
                t *= 1 + model.get("slot", 0.0)
            outlier = rng.random() < model.get("outlier_p", 0.0)
            t *= 1.3 if outlier else 1.0
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


def judged(a: list[float], b: list[float], analysis: str, rounds: int | None) -> V.Verdict:
    n = rounds or MAX
    keys = tuple(range(n)) if analysis == "paired" else None
    pair = [(V.Side("A", tuple(a[:n]), rounds=keys), V.Side("B", tuple(b[:n]), rounds=keys), "")]
    (v,) = V.decide_family(pair, V.Plan(sequential=rounds is None, max_repeats=MAX))
    return v


def simulate(trials: int, seed: int, machine_sigma: float | None) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = [f"A/A false 'faster' rate and power ({trials} simulated sweeps per cell, seed {seed}); fixed: "
             f"{FIXED} rounds, one look; auto: at most {MAX} rounds, looks after {V.looks(MAX)} spending "
             f"{', '.join(f'{x:.4g}' for x in V.spending(MAX).values())}; [median rounds]", ""]
    lines += ["| noise model | analysis | A/A false | " + " | ".join(f"power {g:.0%}" for g in GAPS[1:]) + " |",
              "|" + "---|" * (3 + len(GAPS) - 1)]
    pooled = {x: [0, 0] for x in ANALYSES}
    wrong_way = {x: 0 for x in ANALYSES}
    for name, model in models(machine_sigma).items():
        cells = {x: [] for x in ANALYSES}
        for gap in GAPS:
            hits = {x: 0 for x in ANALYSES}
            cost = {x: [] for x in ANALYSES}
            for _ in range(trials):
                a, b = sweep(rng, model, gap)
                for x in ANALYSES:
                    v = judged(a, b, *x)
                    cost[x].append(v.n_a if v.decided else (x[1] or MAX))
                    if v.outcome == V.FASTER:
                        hits[x] += gap == 0 or v.faster == "A"
                        wrong_way[x] += gap > 0 and v.faster == "B"
            for x in ANALYSES:
                if gap == 0:
                    pooled[x][0] += hits[x]
                    pooled[x][1] += trials
                rate = hits[x] / trials
                text = f"{rate:.1%}" if gap == 0 else f"{rate:.0%}"
                cells[x].append(text + (f" [{statistics.median(cost[x]):g}]" if x[1] is None else ""))
        for x in ANALYSES:
            label = f"{x[0]}, {'fixed 5' if x[1] else 'auto'}"
            lines.append(f"| {name} | {label} | " + " | ".join(cells[x]) + " |")
    lines += ["", f"A/A false 'faster', pooled over the {len(models(machine_sigma))} noise models (95 % Wilson interval); "
                  "verdicts in the wrong direction over all gapped sweeps:"]
    for x, (k, n) in pooled.items():
        lo, hi = wilson(k, n)
        lines.append(f"- {x[0]}, {'fixed 5' if x[1] else 'auto'}: {k / n:.1%} ({lo:.1%}–{hi:.1%}, {n} sweeps); "
                     f"wrong direction: {wrong_way[x]}")
    return lines


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
    p.add_argument("overrides", nargs="*", default=["framework=jax", "model=mlp", "model.preset=tiny"])
    args = p.parse_args()
    sigma = args.sigma
    if args.real:
        sigma = real(args.real, args.overrides) or sigma
    start = time.monotonic()
    print("\n".join(simulate(args.trials, args.seed, sigma)))
    print(f"\n({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
