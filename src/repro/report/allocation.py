"""How to spend a measurement budget between steps per run and runs per config, from calibrate's
A/A records: Kalibera & Jones's two-level allocation (Rigorous benchmarking in reasonable time,
ISMM 2013).

A config's estimate is the mean of r runs' log steady medians. Its variance has two parts: the
per-process effect σ_b² (what differs between fresh processes of one config: layout, allocation,
thread placement, the machine's state), paid once per run, and the sampling error of each run's
median, s²/n for n steady steps (s² the per-step equivalent, read from the run's own moving-block
bootstrap SD of its median). A run costs c_run (its fixed wall: start, imports, build, compile)
plus n·c_step. For a fixed budget the variance r⁻¹(σ_b² + s²/n) is smallest at

    n* = sqrt(c_run · s² / (c_step · σ_b²))

steps per run (the two-level optimum of Kalibera & Jones, their eq. for iterations per
execution). Where σ_b dominates, n* is small: many short runs beat few long ones, since only
more processes average the per-process effect away. The rounds a gap needs then follow from the
noise of a run at n*: given the calibration's measured within-round log ratios (`ratios`), by the
verdict's own test on sweeps resampled from them (`verdict.resampled_gap`), their spread scaled
to a run at n* and their shape (a minority of slow processes, heavy tails) kept as measured, not a
normal assumption; without them, by the normal approximation (`verdict.resolvable_gap`'s inversion).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from repro.ledger.record import view


@dataclass(frozen=True)
class Allocation:
    steps: int  # steady steps per run, n*
    rounds: int | None  # rounds (runs per config) for `gap` at 80 % power; None: over `max_rounds`
    gap: float
    sigma_process: float  # σ_b, in log units
    sigma_sampling: float  # the sampling SD of one run's log median at its measured steps
    steps_measured: float  # the median steady steps the calibration runs had
    run_cost_s: float  # c_run
    step_cost_s: float  # c_step
    wall_per_round_s: float  # one round (two runs) at n*
    rounds_from: str = "normal"  # "resampled": from the measured ratios by the verdict's own test
    statistic: str = ""  # resampled: the verdict.statistic that judged them (report/statistic.py)

    def line(self) -> str:
        rounds = f"{self.rounds} rounds" if self.rounds else "more rounds than is sensible"
        if self.rounds_from == "resampled":
            rounds += (f" (the verdict's statistic, {self.statistic}, on the measured ratios resampled, not a normal "
                       "assumption)")
        return (f"allocation (Kalibera & Jones): per-process noise {100 * self.sigma_process:.1f} %, sampling "
                f"{100 * self.sigma_sampling:.1f} % at {self.steps_measured:.0f} steps; a run costs "
                f"{self.run_cost_s:.2f} s + {1e3 * self.step_cost_s:.3g} ms a step: {self.steps} steady steps "
                f"per run, {rounds} for a {100 * self.gap:.0f} % gap (about {self.wall_per_round_s:.1f} s a round)")


def _log_medians(records: list[dict]) -> list[float]:
    return [math.log(m) for r in records if r.get("status") == "ok" and (m := view(r).results.steady_median_s)]


def _rounds_resampled(ratios: list[float], scale: float, gap: float, max_rounds: int, trim: float,
                      statistic: str) -> int | None:
    """The fewest rounds whose resampled floor is at or below `gap` (doubling, then bisection)."""
    from repro.report import verdict

    scaled = [scale * x for x in ratios]

    def found(n: int) -> bool:
        g = verdict.resampled_gap(scaled, n, trim, resamples=2000, statistic=statistic)
        return g is not None and g <= gap

    hi = 2
    while not found(hi):
        if hi >= max_rounds:
            return None
        hi = min(2 * hi, max_rounds)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if found(mid) else (mid, hi)
    return max(hi, 2)


def recommend(groups: list[list[dict]], gap: float = 0.05, max_rounds: int = 200, ratios: list[float] | None = None,
              trim: float | None = None, statistic: str | None = None) -> Allocation | None:
    """The allocation for `gap`, from calibration records grouped by (trial, label) (runs of one
    config that ran alike); None where the records lack what it needs (a sampling SD per run).
    `ratios`: the A/A within-round log ratios measured; with `verdict.RESAMPLE_MIN` or more, the rounds come from
    them resampled (module docstring), judged by `statistic` at `trim` (defaults: the verdict's)."""
    from repro.report import verdict

    within = [statistics.variance(g) for g in map(_log_medians, groups) if len(g) >= 2]
    runs = [r for g in groups for r in g if r.get("status") == "ok" and view(r).results.steady_median_s]
    res = [view(r).results for r in runs]
    sampling = [(x.steady_median_sd_s / x.steady_median_s) ** 2 for x in res if x.steady_median_sd_s]
    if not within or not sampling:
        return None
    total = statistics.fmean(within)  # var of a run's log median: σ_b² + s²/n at the measured n
    var_sampling = statistics.fmean(sampling)
    var_process = max(total - var_sampling, 1e-12)
    steps = statistics.median(x.steady_steps or 0 for x in res) or 1
    step_s = statistics.median(x.steady_median_s for x in res)
    walls = [r["wall_s"] - (x.steady_steps or 0) * x.steady_median_s for r, x in zip(runs, res) if r.get("wall_s")]
    run_s = max(statistics.median(walls), step_s) if walls else step_s
    per_step_var = var_sampling * steps  # s²: the sampling variance of a one-step median
    # where the per-process part is not resolved (its estimate at or below the sampling part), n*
    # grows without bound: steps stop at ten times a run's fixed cost, past which more steps barely
    # change a run's wall share of the sweep
    cap = max(10, round(10 * run_s / step_s))
    best = min(cap, max(10, round(math.sqrt(run_s * per_step_var / (step_s * var_process)))))
    sigma_run = math.sqrt(var_process + per_step_var / best)
    if ratios is not None and len(ratios) >= verdict.RESAMPLE_MIN:  # the measured distribution, at a run at n*
        scale = sigma_run / math.sqrt(var_process + per_step_var / steps)
        statistic = statistic or verdict.STATISTIC
        rounds = _rounds_resampled(ratios, scale, gap, max_rounds, verdict.TRIM if trim is None else trim, statistic)
        rounds_from = "resampled"
    else:
        rounds = next((n for n in range(2, max_rounds + 1) if verdict.resolvable_gap(sigma_run, n) <= gap), None)
        rounds_from = "normal"
    return Allocation(steps=best, rounds=rounds, gap=gap, sigma_process=math.sqrt(var_process),
                      sigma_sampling=math.sqrt(var_sampling), steps_measured=steps, run_cost_s=run_s,
                      step_cost_s=step_s, wall_per_round_s=2 * (run_s + best * step_s), rounds_from=rounds_from,
                      statistic=statistic if rounds_from == "resampled" else "")
