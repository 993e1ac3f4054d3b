"""How often the verdict engine (repro/report/verdict.py) is wrong, and how often it finds a real gap.

    .venv/bin/python benchmarks/verdict_calibration.py                 # the simulation (a minute)
    .venv/bin/python benchmarks/verdict_calibration.py --trials 1000   # tighter rates
    .venv/bin/python benchmarks/verdict_calibration.py --real 20       # + a real A/A: `repro calibrate` (minutes)

Simulation: two configs A and B, each run's steady median = base × gap (B only) × exp(noise) ×
drift(slot), the runs in the order a sweep runs them (fixed n: A B, A B, ...; auto: A B, B A, ...,
as repro/repeats.py orders its rounds). Noise models:
- lognormal run-to-run noise of 2, 5, 10 and 15 % (sigma of the log);
- outliers: 5 % noise, and one run in ten 30 % slower (a background job, a throttled core);
- drift: 5 % noise and the machine slowing 10 % linearly across a 10-round sweep.

For each model: the A/A false-verdict rate (identical configs called "faster", either way) and
the power (A correctly called faster) for true gaps of 2, 5, 10 and 20 %, at fixed n = 2, 3, 5, 10
repeats per side and at auto (at most 10), with auto's median repeats. Targets (issue 31): A/A
false "faster" <= 5 % everywhere; with auto, power >= 80 % for a 5 % gap at this machine's noise
(`repro calibrate` measures it) at a median cost no more than fixed n = 5.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from repro.report import verdict as V

FIXED = (2, 3, 5, 10)
GAPS = (0.0, 0.02, 0.05, 0.10, 0.20)
MAX = 10


def models(machine_sigma: float | None) -> dict[str, dict]:
    out = {f"lognormal {s:.0%}": {"sigma": s} for s in (0.02, 0.05, 0.10, 0.15)}
    out["outliers (5 %, 1 in 10 runs +30 %)"] = {"sigma": 0.05, "outlier_p": 0.1, "outlier": 0.30}
    out["drift (5 %, +10 % across the sweep)"] = {"sigma": 0.05, "drift": 0.10}
    if machine_sigma:
        out[f"this machine ({machine_sigma:.1%}, repro calibrate)"] = {"sigma": machine_sigma}
    return out


def runs(rng: np.random.Generator, model: dict, gap: float, rounds: int, serpentine: bool) -> tuple[list, list]:
    """Each side's run medians over `rounds` rounds, in the order they ran."""
    a, b = [], []
    for k in range(rounds):
        order = ("a", "b") if not serpentine or k % 2 == 0 else ("b", "a")
        for j, side in enumerate(order):
            slot = 2 * k + j
            t = np.exp(rng.normal(0, model["sigma"])) * (1 + model.get("drift", 0) * slot / (2 * MAX))
            if rng.random() < model.get("outlier_p", 0):
                t *= 1 + model["outlier"]
            (a if side == "a" else b).append(t * (1 + gap if side == "b" else 1))
    return a, b


def cell(rng, model: dict, gap: float, n: int | None, trials: int) -> tuple[float, float, float]:
    """(false "faster" rate, rate of "A faster", median repeats) over `trials` simulated pairs."""
    wrong = right = 0
    cost = []
    for _ in range(trials):
        a, b = runs(rng, model, gap, n or MAX, serpentine=n is None)
        pair = [(V.Side("A", tuple(a)), V.Side("B", tuple(b)), "")]
        plan = V.Plan(sequential=n is None, max_repeats=MAX)
        (v,) = V.decide_family(pair, plan)
        cost.append(v.n_a if n is None else n)
        if v.outcome == V.FASTER:
            right += v.faster == "A" and gap > 0
            wrong += gap == 0 or v.faster == "B"
    return wrong / trials, right / trials, statistics.median(cost)


def simulate(trials: int, seed: int, machine_sigma: float | None) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = [f"A/A false 'faster' rate and power ({trials} simulated pairs per cell, seed {seed}); "
             f"auto: at most {MAX} repeats, median repeats in brackets", ""]
    head = "| noise model | n | A/A false | " + " | ".join(f"power {g:.0%}" for g in GAPS[1:]) + " |"
    lines += [head, "|" + "---|" * (3 + len(GAPS) - 1)]
    pooled: dict = {}
    for name, model in models(machine_sigma).items():
        for n in (*FIXED, None):
            cells, costs = [], []
            for gap in GAPS:
                wrong, right, cost = cell(rng, model, gap, n, trials)
                if gap == 0:
                    pooled[n] = pooled.get(n, 0) + round(wrong * trials)
                cells.append(f"{wrong:.1%}" if gap == 0 else f"{right:.0%}")
                costs.append(cost)
            label = str(n) if n else "auto"
            if n is None:
                cells = [cells[0]] + [f"{c} [{k:g}]" for c, k in zip(cells[1:], costs[1:])]
                cells[0] += f" [{costs[0]:g}]"
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    total = trials * len(models(machine_sigma))
    lines += ["", f"A/A false 'faster', pooled over the {len(models(machine_sigma))} noise models ({total} pairs each; "
                  "95 % Wilson interval):"]
    for n, wrong in pooled.items():
        lo, hi = wilson(wrong, total)
        lines.append(f"- {'auto' if n is None else f'n = {n}'}: {wrong / total:.1%} ({lo:.1%}–{hi:.1%})")
    return lines


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate k/n: how far a rate from a few hundred trials may be off."""
    p, z2 = k / n, z * z
    mid, half = (p + z2 / (2 * n)) / (1 + z2 / n), z * ((p * (1 - p) / n + z2 / (4 * n * n)) ** 0.5) / (1 + z2 / n)
    return mid - half, mid + half


def real(trials: int, overrides: list[str]) -> float | None:
    """A real A/A through `repro calibrate`; the machine's run-to-run noise it printed."""
    cmd = [sys.executable, "-m", "repro", "calibrate", f"--trials={trials}", *overrides]
    print("$ " + " ".join(cmd[1:]), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout + proc.stderr)
    print(f"({time.monotonic() - start:.0f} s)")
    for line in proc.stdout.splitlines():
        if line.startswith("run-to-run noise:"):
            return float(line.split(":")[1].split("%")[0]) / 100
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--real", type=int, default=0, help="trials of a real A/A (repro calibrate); 0: none")
    p.add_argument("--sigma", type=float, default=None, help="this machine's run-to-run noise (else --real's)")
    p.add_argument("overrides", nargs="*", default=["framework=jax", "model=mlp", "model.preset=tiny"])
    args = p.parse_args()
    sigma = args.sigma
    if args.real:
        sigma = real(args.real, args.overrides) or sigma
    print("\n".join(simulate(args.trials, args.seed, sigma)))


if __name__ == "__main__":
    main()
