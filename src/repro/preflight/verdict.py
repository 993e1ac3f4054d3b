"""Checks of how runs are repeated and judged: `run.repeats` (a count or "auto") and `verdict.*`.

Called from checks.plan() with one line (`repeats = verdict.check_plan(...)`: the repeat count the
plan interleaves, 1 for auto, whose rounds repro/repeats.py runs), and by `repro calibrate`
(`check_calibrate`). Each refusal is one line naming the key and the fix.
"""

from __future__ import annotations

import math
from typing import Sequence

from repro.config import schema
from repro.config.schema import ConfigError

AUTO = "auto"


def auto_rounds(jobs: Sequence[schema.Config]) -> bool:
    """Whether a sweep of these configs (each once: a plan's `jobs`) runs auto's rounds: run.repeats=auto
    and at least two configs to compare (one config asked for auto runs once, and says so: api.run_jobs).
    The one answer the launcher's refusal (api.launcher_for), the sweep loop's policy (api.run_jobs) and the
    estimate (preflight/estimate.py) read."""
    return len(jobs) > 1 and jobs[0].run.repeats == AUTO


def check_values(cfg: schema.Config) -> None:
    """One job's `run.repeats` and `verdict.*`."""
    repeats, v = cfg.run.repeats, cfg.verdict
    if repeats != AUTO and (isinstance(repeats, bool) or not isinstance(repeats, int)):
        raise ConfigError(f"run.repeats={repeats!r} must be a whole number of repeats (run.repeats=3) or "
                          "run.repeats=auto (until every pair is decided)")
    if repeats != AUTO and repeats < 1:
        raise ConfigError(f"run.repeats={repeats!r} must be > 0 (or auto)")
    if not 0 < v.band < 1:
        raise ConfigError(f"verdict.band={v.band!r} must be between 0 and 1 (a fraction: verdict.band=0.02 "
                          "calls two configs equivalent within ±2 %)")
    if isinstance(v.max_repeats, bool) or v.max_repeats < 2:
        raise ConfigError(f"verdict.max_repeats={v.max_repeats!r} must be at least 2 (a verdict needs two runs "
                          "per side); e.g. verdict.max_repeats=10")
    if isinstance(v.max_reruns, bool) or not isinstance(v.max_reruns, int) or v.max_reruns < 0:
        raise ConfigError(f"verdict.max_reruns={v.max_reruns!r} must be a whole number >= 0 (how often per sweep "
                          "a round that telemetry flagged runs again; 0: never)")
    if isinstance(v.canary_margin, bool) or not isinstance(v.canary_margin, (int, float)) or \
            not 0 < v.canary_margin < math.inf:
        raise ConfigError(f"verdict.canary_margin={v.canary_margin!r} must be a finite share > 0 (verdict.canary_margin=0.25 "
                          "flags a canary 25 % slower than this host's median); to run no canary: verdict.canary=false")
    if isinstance(v.trim, bool) or not 0 <= v.trim < 0.4:
        raise ConfigError(f"verdict.trim={v.trim!r} must be in [0, 0.4) (the share of rounds the verdict trims from "
                          "each end: verdict.trim=0.2 drops 2 of 10 at each end; 0 gives the plain paired t)")
    if v.statistic != schema.VerdictConfig.statistic:  # the default is registered (test_verdict_statistic): the
        from repro.report import statistic  # registry imports NumPy, 0.2-0.3 s on the path before a worker starts

        if (why := statistic.unknown(v.statistic)) is not None:
            raise ConfigError(why)
    if v.budget_s is not None and not v.budget_s > 0:
        raise ConfigError(f"verdict.budget_s={v.budget_s!r} must be > 0 seconds (or null: no budget)")
    check_bisect(cfg.bisect)


def check_bisect(b: schema.BisectConfig) -> None:
    """`bisect.*`: a sweep's (its records carry them) and `repro bisect`'s, where the flags do not override them."""
    if b.budget_s is not None and (isinstance(b.budget_s, bool) or not isinstance(b.budget_s, (int, float))
                                   or not 0 < b.budget_s < math.inf):
        raise ConfigError(f"bisect.budget_s={b.budget_s!r} must be a finite number of seconds > 0 (or null: no budget), "
                          "e.g. bisect.budget_s=3600")
    if b.max_rounds is not None and (isinstance(b.max_rounds, bool) or not isinstance(b.max_rounds, int)
                                     or b.max_rounds < 2):
        raise ConfigError(f"bisect.max_rounds={b.max_rounds!r} must be a whole number >= 2 (a verdict needs two "
                          "rounds; null: verdict.max_repeats), e.g. bisect.max_rounds=8")


def check_plan(jobs: Sequence[schema.Config]) -> int:
    """Every job's values, then the sweep's (run.repeats=auto on a single config runs once; under every
    launcher the loop decides each round: loop/rounds.py). Returns how many times the plan lists
    each config (1 for auto)."""
    for job in jobs:
        check_values(job)
    if not jobs:
        return 1
    repeats = jobs[0].run.repeats
    # auto: once here, whether its rounds run (`auto_rounds`: repro/repeats.py's) or a single config runs once
    return 1 if repeats == AUTO else repeats


def check_calibrate(multirun: bool, overrides: Sequence[str], jobs: Sequence[schema.Config] | None = None) -> None:
    """`repro calibrate` runs one config against itself: a sweep (a,b, -m, an exp that sweeps) is
    refused, and so is run.repeats (calibrate sets its own)."""
    swept = [o for o in overrides if "," in o.split("=", 1)[-1] and not o.split("=", 1)[-1].startswith("[")]
    if multirun or swept or (jobs is not None and len(jobs) != 1):
        what = ", ".join(swept) or ("-m" if multirun and jobs is None else "the exp's sweep")
        raise ConfigError(f"repro calibrate runs one config against itself, but {what} asks for several; "
                          "give one value per key (e.g. repro calibrate framework=jax model=mlp)")
    if any(o.split("=", 1)[0].lstrip("+~") == "run.repeats" for o in overrides):
        raise ConfigError("run.repeats: repro calibrate sets its own repeats (--trials, --repeats); leave run.repeats out")
