"""repro from Python (a notebook, a script): the CLI's path, in this process.

    import repro
    rec = repro.run(framework="jax", model="mlp", **{"run.steps": 10})   # one run → its ledger record
    recs = repro.sweep("quickstart", **{"run.steps": 10})              # +exp=quickstart → its records
    repro.Ledger(rec["config"]["ledger"]["dir"]).heads()              # a record's config is a dict

Keyword arguments are Hydra overrides (`group=option`, `dotted.key=value`; a list sweeps the
key, as `a,b` does on the command line). The whole sweep is composed and checked first
(`preflight.plan`, as `repro` does): a bad config raises `ConfigError` naming the key and the
fix, before anything runs or is written. Then each job runs through `run_job` in a fresh
worker process, into the same ledger and MLflow store as `repro` would use.
"""

from __future__ import annotations

from typing import Any

from repro.config import ConfigError


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return ",".join(_value(v) for v in value)
    return str(value)


def _overrides(overrides: dict[str, Any]) -> list[str]:
    return [f"{key}={_value(value)}" for key, value in overrides.items()]


def runs_here(plan) -> bool:
    """The plan's jobs run in this process, one after the other (Hydra's BasicLauncher), so they
    can run from its composed configs (`run_plan`): no second compose by Hydra."""
    return plan.launcher.in_process


SINGLE_AUTO = ("run.repeats=auto: a single config has nothing to compare, so it runs once; sweep what you "
               "compare (-m framework=jax,torch run.repeats=auto) for a verdict")


def admit(plan) -> None:
    """Before a checked plan's first job: its estimate from the ledger (preflight/estimate.py),
    refused (ConfigError) where verdict.budget_s cannot hold it; a sweep's first line says it."""
    from repro.preflight import estimate
    from repro.usertext import shown

    est = estimate.admit(plan)
    if plan.multirun or len(plan.jobs) > 1:
        print(shown(f"sweep: {est.summary()}"), flush=True)


def plan_session(plan):
    """The session of a checked plan whose jobs run in this process."""
    from repro.session import Session

    return Session(plan.jobs[0], plan.multirun or len(plan.jobs) > 1, plan)


def run_jobs(plan, session) -> list[dict]:
    """Run every job of a checked plan in `session` (a worker process per job) through the sweep
    loop (runner/sweep.py), then close it; its records. Interrupted or failed: closed (what was
    recorded stays), then re-raised."""
    from repro.runner import sweep

    repeats = plan.jobs[0].run.repeats
    if repeats == "auto" and len(plan.jobs) > 1:  # rounds until every pair is decided (repro/repeats.py)
        from repro.repeats import Auto

        policy = Auto(plan, session)
    else:
        if repeats == "auto":
            from repro.console import console

            console().print(SINGLE_AUTO, markup=False, highlight=False)
        policy = sweep.Fixed(plan.configs, plan.repeats, session.sweep_id, session.run_name)
    return sweep.run(session, policy, sweep.order_seed(session.sweep_id), plan.jobs[0].verdict.max_reruns)


def run_plan(plan) -> list[dict]:
    """Run every job of a checked plan in this process (a worker process per job); its records."""
    return run_jobs(plan, plan_session(plan))


def run(**overrides: Any) -> dict:
    """One run; returns its `finished` ledger record (status ok, failed, oom, killed...); with
    run.repeats=N it runs N times and returns the first repeat's record (all are in the ledger)."""
    from repro import preflight
    from repro.runner import snapshot

    swept = [key for key, value in overrides.items() if isinstance(value, (list, tuple))]
    if swept:
        raise ConfigError(f"repro.run runs one job, but {', '.join(swept)} is a list (a sweep); "
                          "use repro.sweep(...) for several")
    with snapshot.running(snapshot.take()):  # the run's code and conf/ as they are now
        plan = preflight.plan(_overrides(overrides))
        if plan.multirun or len(plan.jobs) != plan.jobs[0].run.repeats:  # e.g. an exp that sweeps
            raise ConfigError(f"repro.run runs one job, but {' '.join(_overrides(overrides))} plans "
                              f"{len(plan.jobs)} jobs (a sweep); use repro.sweep(...) for several")
        admit(plan)
        return run_plan(plan)[0]


def sweep(exp: str | None = None, **overrides: Any) -> list[dict]:
    """Every job of `+exp=EXP` (or of the swept overrides); returns their records in job order."""
    from repro import preflight
    from repro.runner import snapshot

    args = ([f"+exp={exp}"] if exp else []) + _overrides(overrides)
    with snapshot.running(snapshot.take()):  # the sweep's code and conf/ as they are now, whatever is edited meanwhile
        plan = preflight.plan(["--multirun", *args])
        admit(plan)
        return run_plan(plan)


def compare(*ids: str, sweep: str | None = None, experiment: str | None = None, ledger: str | None = None,
            frame: bool = True):
    """The comparison `repro compare` prints, as data: one row per config (report/comparison.py),
    a pandas DataFrame (numbers in seconds, `x_best` ranked by the `by` column's rule), or with
    `frame=False` the list of `Row` dataclasses. Give run ids, `sweep=` or `experiment=`;
    `ledger`: its folder (default: the repo's ledger/, as the CLI)."""
    from dataclasses import asdict, fields

    from repro.ledger import Ledger
    from repro.report import comparison
    from repro.report.compare import newest_sweep, sweep_runs

    if sum(map(bool, (ids, sweep, experiment))) != 1:
        raise ValueError("repro.compare: give run ids, sweep=ID or experiment=NAME (one of them)")
    store = Ledger(ledger)
    records = (sweep_runs(store, sweep) if sweep else newest_sweep(store, experiment) if experiment
               else [store.get(i) for i in ids])
    comp = comparison.build(records)
    if not frame:
        return comp.rows
    import pandas as pd

    numbers = [f.name for f in fields(comparison.Row) if f.name != "records"]
    return pd.DataFrame([{"by": t.by, **{k: asdict(row)[k] for k in numbers}, "ids": row.ids}
                         for t in comp.tables for row in t.rows])


def write_report(sweep: str | None = None, experiment: str | None = None, ledger: str | None = None,
           out: str | None = None):
    """Write a sweep's report (report.md, results.csv, plots) now, in this process, as `repro
    report` does; returns report.md's path. Give `sweep=` (an id or a unique prefix) or
    `experiment=` (its newest sweep); `out`: the folder (default: `<ledger>/.reports/<sweep id>`)."""
    from pathlib import Path

    from repro.ledger import Ledger
    from repro.report import sweep_report
    from repro.report.compare import newest_sweep, sweep_runs

    if sum(map(bool, (sweep, experiment))) != 1:
        raise ValueError("repro.write_report: give sweep=ID or experiment=NAME (one of them)")
    store = Ledger(ledger)
    records = sweep_runs(store, sweep) if sweep else newest_sweep(store, experiment)
    folder = Path(out) if out else sweep_report.default_dir(records, store.root)
    sweep_report.write(records, folder)
    return folder / sweep_report.PAGE
