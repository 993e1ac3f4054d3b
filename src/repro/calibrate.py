"""`repro calibrate [--trials N] [--repeats R | --auto | --gap G] [overrides]`: this machine's noise
floor and the verdict's power, measured.

A/A trials: one config run under two labels, A and B, every run a fresh worker recorded in the
ledger like any other (`calibration`: {trial, label} in its record), through the sweep loop
(loop/sweep.py) as a policy of it (`Trials`): each round runs A and B once in a fresh random
order. A trial is R rounds (`--repeats`), or, with `--auto`, the rounds `run.repeats=auto` would
run: until the pair is decided at a planned look, at most `verdict.max_repeats`. Identical configs
have no true gap, so every "faster" verdict between A and B is a false one: their rate is the
engine's false-verdict rate on this machine. `--gap G` gives label B a known extra G of its step
time (a busy-wait inside its measured steps: worker/injected.py; recorded, and reachable from
calibrate alone) and runs auto trials, or trials of R rounds with `--repeats R` (the power of a
fixed `run.repeats=R` at the same gap): the share of trials that find it is the verdict's power.
It prints the noise of a verdict's unit and what it is made of, which noise it is (the robust
spread beside the SDs, the slow processes and what caught each: report/noise.py), the
false-verdict rate (or the power), and the smallest gap resolvable at 3, 5 and 10 rounds by the
verdict's own test on the measured log ratios resampled, and stores them in a ledger record
of kind "calibration" for this host (report/floor.py reads the newest one: a "faster" verdict
below the floor says so in its sentence).

    repro calibrate framework=jax model=mlp model.preset=tiny            # 20 trials, 2 rounds each
    repro calibrate --trials 40 --auto framework=jax model=vit model.preset=tiny
    repro calibrate --gap 0.05 --trials 20 framework=jax model=vit model.preset=tiny
    repro calibrate --gap 0.05 --trials 20 --repeats 5 framework=jax model=vit model.preset=tiny
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import sys

from repro.ledger.record import view
from repro.loop.sweep import Job, Policy, repeat_field

FLOOR_REPEATS = (3, 5, 10)
DEFAULT_TRIALS, DEFAULT_REPEATS = 20, 2
MAX_TRIALS = 1000  # 2,000 runs at the least: more is a mistake, not a calibration


def add_parser(sub, common) -> None:
    p = sub.add_parser("calibrate", help="A/A trials of one config: run-to-run noise, false verdicts, the "
                                         "smallest gap this machine resolves, the power at a known gap (stored per host)",
                       epilog="examples:\n"
                       "  repro calibrate framework=jax model=mlp model.preset=tiny\n"
                       "  repro calibrate --trials 40 --auto framework=jax model=vit model.preset=tiny\n"
                       "  repro calibrate --gap 0.05 --trials 20 framework=jax model=vit model.preset=tiny")
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the one config (key=value)")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                   help=f"A/A trials (default {DEFAULT_TRIALS}, at most {MAX_TRIALS})")
    p.add_argument("--repeats", type=int, default=None,
                   help=f"rounds per trial (default {DEFAULT_REPEATS}; each round runs A and B once); with --gap: "
                        "fixed trials of this many rounds instead of auto ones")
    p.add_argument("--auto", action="store_true",
                   help="each trial runs rounds until decided, as run.repeats=auto does (verdict.max_repeats at most)")
    p.add_argument("--gap", type=float, default=None,
                   help="give label B this extra share of its step time (0 < G < 1, e.g. 0.05) and measure the "
                        "power of auto trials (or of --repeats R rounds) to find it")
    # the levers a measurement of the protocol turns off, one at a time (docs/how-to/calibrate.md: what each buys)
    p.add_argument("--order", choices=("crossover", "random", "fixed"), default="crossover",
                   help="crossover (default, as sweeps run): random orders in AB/BA pairs of rounds; random: each "
                        "round drawn on its own; fixed: the serpentine A B, B A, ... of earlier versions (the last "
                        "two measure what the default buys)")
    p.add_argument("--loud", action="store_true",
                   help="no quiet window: MLflow's projectors write beside the measured steps, as in earlier "
                        "versions, to measure what the window buys")
    p.add_argument("-m", "--multirun", action="store_true", help=argparse.SUPPRESS)  # refused: one config
    p.set_defaults(func=run)


def _plan(args):
    """The one config, checked; ConfigError naming the flag or key otherwise (nothing written)."""
    from repro import preflight
    from repro.config import ConfigError
    from repro.preflight import verdict as checks

    if not 2 <= args.trials <= MAX_TRIALS:
        raise ConfigError(f"--trials={args.trials} must be between 2 and {MAX_TRIALS} (give 20 or more for a rate)")
    if args.gap is not None and not 0 < args.gap < 1:
        raise ConfigError(f"--gap={args.gap} must be between 0 and 1 (a share of the step time: --gap 0.05 is 5 %)")
    if args.repeats is not None and args.auto:
        raise ConfigError(f"--repeats={args.repeats} with --auto: give one (--auto runs rounds until decided, at most "
                          "verdict.max_repeats)")
    if args.repeats is None:
        args.repeats = DEFAULT_REPEATS
        args.auto = args.auto or args.gap is not None  # a gap's trials are auto unless given their rounds
    if args.repeats < 2 and not args.auto:
        raise ConfigError(f"--repeats={args.repeats} must be at least 2 (a verdict needs two runs per side)")
    if args.repeats > MAX_TRIALS:
        raise ConfigError(f"--repeats={args.repeats} must be at most {MAX_TRIALS}")
    checks.check_calibrate(args.multirun, args.overrides)  # before composing: a sweep is named as such
    plan = preflight.plan(list(args.overrides))
    checks.check_calibrate(plan.multirun, args.overrides, plan.jobs)
    return plan


def planned(plan, args) -> str:
    """What calibrate will run and, from the ledger's past runs of the config on this hardware
    (preflight/estimate.py), about how long: said before its first run."""
    from repro.preflight import estimate

    rounds = plan.jobs[0].verdict.max_repeats if args.auto else args.repeats
    runs = 2 * args.trials * rounds
    what = f"calibrate: {args.trials} trials × {'at most ' if args.auto else ''}{rounds} rounds × 2 sides = " \
           f"{'at most ' if args.auto else ''}{runs:,} runs"
    (cost,) = estimate.of(plan).configs[:1]
    if cost.per_run_s is None:
        return f"{what}; no history of this config on this hardware: no estimate"
    return f"{what}, about {estimate.duration(runs * cost.per_run_s)} ({estimate.duration(cost.per_run_s)} a run, " \
           f"the median of {cost.past} past runs of this config on this hardware)"


class Trials(Policy):
    """Calibrate's trials as rounds of the sweep loop: A and B once per round, in random order (AB/BA pairs)."""

    def __init__(self, config, overrides, args, host):
        self.config, self.overrides, self.sweep_id = config, tuple(overrides), host.sweep_id
        self.trials, self.gap = args.trials, args.gap
        self.crossover = args.order != "random"  # --order random: rounds drawn unpaired
        self.auto = args.auto
        self.per_trial = config.verdict.max_repeats if self.auto else args.repeats
        # an auto trial's runs say so, as run.repeats=auto's do (repeats.py): their verdict is
        # then judged at the planned looks, by the stopping rule and by the summary alike
        v = config.verdict
        self.auto_field = {"max": v.max_repeats, "band": v.band, "budget_s": None} if self.auto else None
        self.max_rounds = self.trials * self.per_trial
        self.trial, self.index, self.failure = 0, 0, None
        self.rounds_of: list[int] = []  # rounds each finished trial took

    def round(self, k: int) -> list[Job]:
        jobs = []
        for label in ("A", "B"):
            gap = {"gap": self.gap} if self.gap is not None and label == "B" else {}
            jobs.append(Job(self.config, self.overrides, f"calibrate {label}", {
                "calibration": {"trial": self.trial, "label": label, **gap},
                "repeat": repeat_field(self.index, self.per_trial, f"{self.sweep_id}/{label}",
                                       **({"auto": self.auto_field} if self.auto_field else {}))}))
        return jobs

    def second_of_pair(self, k: int) -> bool:
        # pairs restart with each trial (an auto trial ends after 3 or 5 rounds): the sweep's
        # round count would pair a trial's last round with the next trial's first
        return self.index % 2 == 1

    def more(self, k: int, host) -> bool:
        recent = host.records[-2:]
        if bad := next((view(r) for r in recent if view(r).status != "ok"), None):
            self.failure = f"{bad.raw.get('status')}: {bad.error.get('reason', 'no reason recorded')}"
            return False
        self.index += 1
        if self.index >= self.per_trial or (self.auto and _decided(host.records, self.trial, self.index, self.per_trial)):
            self.rounds_of.append(self.index)
            self.trial, self.index = self.trial + 1, 0
        return self.trial < self.trials


def _decided(records: list[dict], trial: int, rounds: int, max_repeats: int) -> bool:
    """Whether a trial's pair is decided at this round, as run.repeats=auto stops on it: at a
    planned look, paired over the trial's rounds (the verdict its summary then reports)."""
    from repro.report import noise
    from repro.report.reruns import kept

    if rounds not in _looks(max_repeats):
        return False
    labels: dict[str, list[dict]] = {}
    for r in kept(records):
        if (cal := view(r).calibration).trial == trial:
            labels.setdefault(cal.label, []).append(r)
    return len(labels) == 2 and (v := noise.trial_verdict(labels, ("A", "B"))) is not None and v.decided


def _looks(max_repeats: int) -> tuple[int, ...]:
    from repro.report import verdict

    return verdict.looks(max_repeats)


def summarise(records: list[dict], repeats: int):
    """The calibration's numbers from its run records (each with `calibration`: trial, label):
    report/noise.py takes the noise apart (a `noise.Summary`); `repeats` is what was asked for."""
    from repro.report import noise

    return dataclasses.replace(noise.summarise(records), repeats=repeats)


def lines(s, host: str) -> list[str]:
    """What `repro calibrate` prints (and `benchmarks/verdict_calibration.py` reads back)."""
    from repro.report import noise

    return noise.lines(s, host)


def run(args) -> int:
    from repro.api import launcher_for, plan_session
    from repro.config import ConfigError
    from repro.loop import sweep
    from repro.worker import lifeline

    try:
        plan = _plan(args)
    except (ConfigError, FileNotFoundError) as e:
        print(f"repro calibrate: invalid config, nothing was run:\n  {e}", file=sys.stderr)
        return 2
    config, overrides = plan.jobs[0], list(plan.overrides[0])
    print(planned(plan, args), flush=True)
    lifeline.interrupt_on_signals()  # SIGTERM ends calibrate as Ctrl-C does: recorded, closed
    session = plan_session(plan)
    try:  # each round where its launcher runs it (hydra/launcher=submitit_slurm: one SLURM job a round)
        launcher = launcher_for(plan, session, list(args.overrides))
    except ConfigError as e:
        print(f"repro calibrate: nothing was run: {e}", file=sys.stderr)
        return 2
    policy = Trials(config, overrides, args, session)
    if args.loud:
        from repro.worker import machine_locks

        machine_locks.WINDOWS = False
    seed = sweep.order_seed(session.sweep_id) if args.order != "fixed" else None
    stored: list[dict] = []
    try:  # an interrupt while the summary is computed ends as one during the trials (the device pass's budget cut one there)
        records = sweep.run(session, policy, seed, config.verdict.max_reruns, launcher)
        return _summarised(config, overrides, session, records, args, policy, stored)
    except KeyboardInterrupt:
        done = [r for r in session.records if "calibration" in r]
        if not stored:
            _store(config, overrides, session, done, args, policy, status="interrupted")
        print(f"repro calibrate: interrupted after {policy.trial} of {args.trials} trials; "
              f"{len(done)} runs recorded{'; the calibration was stored' if stored else ''}", file=sys.stderr)
        return 130


def _summarised(config, overrides, session, records, args, policy, stored: list) -> int:
    """The trials' summary printed and stored (`stored` gets the record once it is in the ledger)."""
    if policy.failure:
        print(f"repro calibrate: stopped after the first run that did not end ok ({policy.failure}); "
              "nothing stored: fix the config, then calibrate again", file=sys.stderr)
        return 1
    from repro.report.reruns import kept

    calibration = [r for r in kept(records) if "calibration" in r]
    summary = summarise(calibration, policy.per_trial)
    host = _host(records)
    for line in lines(summary, host):
        print(line)
    from repro.report import allocation, noise

    groups: dict = {}
    for r in calibration:
        groups.setdefault((view(r).calibration.trial, view(r).calibration.label), []).append(r)
    # how to spend runs and steps on this host; the rounds from the measured ratios, not a normal assumption
    if plan_ := allocation.recommend(list(groups.values()), ratios=noise.aa_log_ratios(calibration),
                                    trim=summary.trim, statistic=summary.statistic):
        print(plan_.line())
        summary = dataclasses.replace(summary, allocation={"steps": plan_.steps, "rounds": plan_.rounds,
                                                           "gap": plan_.gap})
    if not summary.floor:
        print("repro calibrate: no ok runs to measure noise from; nothing stored", file=sys.stderr)
        return 1
    record = _store(config, overrides, session, calibration, args, policy, summary=summary, host=host)
    stored.append(record)
    from repro.report import floor

    print(f"stored: ledger {record['id']} (kind {floor.KIND}, host {host}); a \"faster\" verdict on this host "
          "below the floor says so")
    return 0


def _store(config, overrides, session, records, args, policy, summary=None, host=None, status="ok") -> dict:
    """The calibration's ledger record (status interrupted: the trials done, no floor)."""
    from repro.config import config_hash
    from repro.config.schema import as_dict
    from repro.ledger import Ledger
    from repro.report import floor

    host = host or _host(records)
    return Ledger(config.ledger.dir).append({
        "kind": floor.KIND, "status": status, "host": host, "config_hash": config_hash(as_dict(config)),
        "config": as_dict(config), "overrides": overrides, "sweep": {"id": session.sweep_id},
        "protocol": {"trials": args.trials, "rounds_per_trial": policy.per_trial, "auto": policy.auto,
                     "gap": args.gap, "order": args.order, "quiet_window": not args.loud, "trials_done": policy.trial, "rounds_of_trials": policy.rounds_of},
        "runs_ids": [view(r).id for r in records], **(summary.as_dict() if summary else {})})


def _host(records: list[dict]) -> str:
    """The host the runs were measured on (the first that recorded its machine), else this one."""
    return next((view(r).machine.host for r in records if view(r).machine.raw), socket.gethostname())
