"""report/allocation.py: Kalibera & Jones's split of a budget between steps per run and runs."""

from __future__ import annotations

import math
import random

from repro.report import allocation


def _groups(sigma_process: float, sigma_sampling: float, steps: int, run_s: float, step_s: float,
            groups: int = 30, runs: int = 4, seed: int = 0) -> list[list[dict]]:
    rng = random.Random(seed)
    out = []
    for _ in range(groups):
        g = []
        for _ in range(runs):
            median = step_s * math.exp(rng.gauss(0, sigma_process) + rng.gauss(0, sigma_sampling))
            g.append({"status": "ok", "wall_s": run_s + steps * median,
                      "results": {"steady_median_s": median, "steady_median_sd_s": sigma_sampling * median,
                                  "steady_steps": steps}})
        out.append(g)
    return out


def test_process_noise_dominating_asks_for_short_runs():
    a = allocation.recommend(_groups(0.08, 0.005, 400, 2.0, 0.001))
    assert a.sigma_process == __import__("pytest").approx(0.08, rel=0.25)
    assert a.steps < 400  # the per-process effect dominates: fewer steps, more runs
    assert a.rounds is not None and a.rounds > 10
    assert "Kalibera & Jones" in a.line() and f"{a.steps} steady steps per run" in a.line()


def test_sampling_noise_dominating_asks_for_longer_runs():
    a = allocation.recommend(_groups(0.005, 0.05, 50, 2.0, 0.001))
    assert a.steps > 50 and a.sigma_sampling > a.sigma_process


def test_without_a_sampling_sd_there_is_no_recommendation():
    groups = _groups(0.05, 0.01, 100, 1.0, 0.001)
    for g in groups:
        for r in g:
            del r["results"]["steady_median_sd_s"]
    assert allocation.recommend(groups) is None


def test_unresolved_process_noise_caps_the_steps_at_ten_times_a_runs_fixed_cost():
    a = allocation.recommend(_groups(0.0, 0.2, 6, 1.5, 0.0004))  # no per-process part: n* would be unbounded
    assert a.steps <= round(10 * a.run_cost_s / a.step_cost_s) + 1
    assert a.wall_per_round_s < 2 * 11 * a.run_cost_s + 1
