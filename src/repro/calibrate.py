"""`repro calibrate [--trials N] [--repeats R] [overrides]`: this machine's noise floor, measured.

A/A trials: one config run under two labels, A and B, R repeats each per trial, interleaved
(A B, B A, ...), N trials, every run a fresh worker recorded in the ledger like any other
(`calibration`: {trial, label} in its record). Identical configs have no true gap, so every
"faster" verdict (report/verdict.py, at R repeats per side) between A and B is a false one:
their rate is the engine's false-verdict rate on this machine. It prints

- the run-to-run noise: the pooled standard deviation of log run medians within each
  (trial, label) group (`verdict.noise`);
- the false-verdict rate it observed (and how many trials came out equivalent / undecided);
- the smallest gap the engine resolves with 80 % power at 3, 5 and 10 repeats at that noise
  (`verdict.resolvable_gap`): the floor,

and stores them in a ledger record of kind "calibration" for this host (report/floor.py reads
the newest one: a "faster" verdict below the floor says so in its sentence).

    repro calibrate framework=jax model=mlp model.preset=tiny            # 20 trials, 2 repeats each
    repro calibrate --trials 30 --repeats 3 framework=torch model=mlp
"""

from __future__ import annotations

import argparse
import socket
import sys

FLOOR_REPEATS = (3, 5, 10)
DEFAULT_TRIALS, DEFAULT_REPEATS = 20, 2


def add_parser(sub, common) -> None:
    p = sub.add_parser("calibrate", help="A/A trials of one config: run-to-run noise, false verdicts, the "
                                         "smallest gap this machine resolves (stored per host)",
                       epilog="examples:\n"
                       "  repro calibrate framework=jax model=mlp model.preset=tiny\n"
                       "  repro calibrate --trials 30 --repeats 3 framework=torch model=mlp")
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the one config (key=value)")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"A/A trials (default {DEFAULT_TRIALS})")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"repeats per label per trial (default {DEFAULT_REPEATS})")
    p.add_argument("-m", "--multirun", action="store_true", help=argparse.SUPPRESS)  # refused: one config
    p.set_defaults(func=run)


def _plan(args):
    from repro import preflight
    from repro.config import ConfigError
    from repro.preflight import verdict as checks

    if args.trials < 2:
        raise ConfigError(f"--trials={args.trials} must be at least 2 (give 20 or more for a rate)")
    if args.repeats < 2:
        raise ConfigError(f"--repeats={args.repeats} must be at least 2 (a verdict needs two runs per side)")
    checks.check_calibrate(args.multirun, args.overrides)  # before composing: a sweep is named as such
    plan = preflight.plan(list(args.overrides))
    checks.check_calibrate(plan.multirun, args.overrides, plan.jobs)
    runs = args.trials * args.repeats * 2
    return preflight.Plan(multirun=True, jobs=plan.jobs * runs, overrides=plan.overrides * runs,
                          launcher=plan.launcher)


def summarise(records: list[dict], repeats: int) -> dict:
    """The calibration's numbers from its run records (each with `calibration`: trial, label):
    report/noise.py takes the noise apart; `repeats` is what was asked for."""
    from repro.report import noise

    return {**noise.summarise(records), "repeats": repeats}


def lines(s: dict, host: str) -> list[str]:
    """What `repro calibrate` prints (and `benchmarks/verdict_calibration.py` reads back)."""
    from repro.report import noise

    return noise.lines(s, host)


def run(args) -> int:
    from repro.api import plan_session
    from repro.config import ConfigError
    from repro.ledger import Ledger
    from repro.runner.job import run_job

    try:
        plan = _plan(args)
    except (ConfigError, FileNotFoundError) as e:
        print(f"repro calibrate: invalid config, nothing was run:\n  {e}", file=sys.stderr)
        return 2
    config, overrides = plan.jobs[0], list(plan.overrides[0])
    session = plan_session(plan)
    job = 0
    try:
        for trial in range(args.trials):
            for k in range(args.repeats):
                for label in ("A", "B") if (trial * args.repeats + k) % 2 == 0 else ("B", "A"):
                    extra = {"calibration": {"trial": trial, "label": label},
                             "repeat": {"index": k, "count": args.repeats, "group": f"{session.sweep_id}/{label}"}}
                    session.warm.upcoming = config if job + 1 < len(plan.jobs) else None
                    run_job(config, session, job, overrides, extra=extra, name=f"calibrate {label}")
                    job += 1
    except BaseException:
        session.close(interrupted=True)
        raise
    records = session.close()
    summary = summarise([r for r in records if "calibration" in r], args.repeats)
    host = next((r["machine"]["host"] for r in records if r.get("machine")), socket.gethostname())
    for line in lines(summary, host):
        print(line)
    if not summary["floor"]:
        print("repro calibrate: no ok runs to measure noise from; nothing stored", file=sys.stderr)
        return 1
    from repro.config import config_hash
    from repro.config.schema import as_dict
    from repro.report import floor

    record = Ledger(config.ledger.dir).append({
        "kind": floor.KIND, "status": "ok", "host": host, "config_hash": config_hash(as_dict(config)),
        "config": as_dict(config), "overrides": overrides, "sweep": {"id": session.sweep_id},
        "runs_ids": [r["id"] for r in records], **summary})
    print(f"stored: ledger {record['id']} (kind {floor.KIND}, host {host}); a \"faster\" verdict on this host "
          "below the floor says so")
    return 0
