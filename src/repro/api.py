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


SINGLE_AUTO = ("run.repeats=auto: a single config has nothing to compare, so it runs once; sweep what you "
               "compare (-m framework=jax,torch run.repeats=auto) for a verdict")


def admit(plan) -> None:
    """Before a checked plan's first job: its estimate from the ledger (preflight/estimate.py),
    refused (ConfigError) where verdict.budget_s cannot hold it; a sweep's first line says it."""
    from repro.preflight import estimate
    from repro.usertext import shown

    est = estimate.admit(plan)
    if plan.multirun or plan.runs > 1:
        print(shown(f"sweep: {est.summary()}"), flush=True)


def plan_session(plan, warm=None):
    """The session of a checked plan whose jobs run in this process; `warm`: its first job's worker,
    started already (job/warm.py `ahead_of_session`)."""
    from repro.session import Session

    return Session(plan.jobs[0], plan.multirun or plan.runs > 1, plan, warm=warm)


def launcher_for(plan, session, args: list[str] = ()):
    """The launcher adapter of a checked plan (loop/rounds.py): its rounds in this process (the
    default), or, for any other registered launcher (loop/launchers.py: `hydra/launcher=joblib`,
    `submitit_local`, `submitit_slurm`, `ray`), each round where that launcher runs it, with the
    parameters of the composed `hydra.launcher` node (`args`: the command line, composed again for
    that node). A launcher may refuse the plan as it is made (a SLURM round whose configs' estimated
    time passes its time limit: ConfigError), and run.repeats=auto is refused with an adapter that
    cannot report back between rounds (`rounds.refusal`)."""
    from repro.loop import rounds
    from repro.preflight import estimate
    from repro.preflight.verdict import auto_rounds

    if plan.launcher.in_process:
        adapter = plan.launcher.make(None)
    else:
        node, sweep_dir, _ = launcher_node(list(args))
        adapter = adapter_of(plan.launcher, node, sweep_dir, session, args, lambda: estimate.of(plan))
    if why := rounds.refusal(adapter, auto_rounds(plan.jobs)):
        raise ConfigError(why)
    return adapter


def launcher_from(session, args: list[str], composed: tuple | None):
    """The adapter of a command line's `hydra/launcher=...` and `hydra.*` overrides alone, `composed` by
    `launcher_node(args)` (None: none given, this process), for a command that has no plan of its own
    (`repro bisect`, whose rounds each decide the next): ConfigError for one that cannot hand a round's
    records back before the next."""
    from repro.loop import launchers, rounds

    kind = composed[2] if composed is not None else launchers.default()
    if kind.in_process:
        return kind.make(None)
    node, sweep_dir, kind = composed
    adapter = adapter_of(kind, node, sweep_dir, session, args)
    if why := rounds.refusal(adapter, True):
        raise ConfigError(why)
    return adapter


def adapter_of(kind, node: dict, sweep_dir: str, session, args: list[str], estimate=None):
    """The adapter of registered launcher `kind` (loop/launchers.py `Registration`) with its composed
    `hydra.launcher` node; `estimate()`: the plan's, where there is one (a scheduler's time limit)."""
    import functools
    from pathlib import Path

    from repro.job import hydra_dirs
    from repro.loop.launchers import Launch
    from repro.session import attached

    if why := kind.missing():
        raise ConfigError(why)
    hydra_dirs.prune(sweep_dir)  # older sweeps' folders under repro's cache
    attach = functools.partial(attached, session.shared())
    return kind.make(Launch(node, Path(sweep_dir), attach, tuple(args), estimate))


def launcher_node(args: list[str]) -> tuple[dict, str, Any]:
    """The composed `hydra.launcher` node of a command line (resolved, without `_target_`), its
    `hydra.sweep.dir` (the parameters an adapter hands its executor) and the launcher's kind."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf, open_dict

    from repro import paths
    from repro.preflight import search

    overrides = [a for a in args if not a.startswith("-")]
    plain = [o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_sweep_override()]
    GlobalHydra.instance().clear()
    search.register_entry_points(overrides)
    try:
        with initialize_config_dir(config_dir=str(paths.conf_dir()), version_base="1.3"):
            top = compose("config", overrides=plain, return_hydra_config=True)
            with open_dict(top):
                top.hydra.job.name = top.hydra.job.get("name") or "repro"
            HydraConfig.instance().set_config(top)
            node = OmegaConf.to_container(top.hydra.launcher, resolve=True)
            sweep_dir = str(top.hydra.sweep.dir)
    finally:
        GlobalHydra.instance().clear()
    from repro.loop import launchers

    return node, sweep_dir, launchers.parse(node.pop("_target_", None))


def run_jobs(plan, session, launcher=None) -> list[dict]:
    """Run every job of a checked plan in `session` (a worker process per job) through the sweep
    loop (loop/sweep.py), each round handed to `launcher` (`launcher_for`; None: in this process),
    then close it; its records. Interrupted or failed: closed (what was recorded stays), then re-raised."""
    from repro.loop import sweep
    from repro.preflight.verdict import AUTO, auto_rounds

    if auto_rounds(plan.jobs):  # rounds until every pair is decided (repro/repeats.py)
        from repro.repeats import Auto

        policy = Auto(plan, session)
    else:
        if plan.jobs[0].run.repeats == AUTO:
            from repro.console import console

            console().print(SINGLE_AUTO, markup=False, highlight=False)
        policy = sweep.Fixed(plan.configs, plan.repeats, session.sweep_id, session.run_name)
    return sweep.run(session, policy, sweep.order_seed(session.sweep_id), plan.jobs[0].verdict.max_reruns, launcher)


def run_plan(plan, args: list[str] = ()) -> list[dict]:
    """Run every job of a checked plan (a worker process per job, each round where its launcher
    runs it: `launcher_for`); its records."""
    session = plan_session(plan)
    return run_jobs(plan, session, launcher_for(plan, session, args))


def run(**overrides: Any) -> dict:
    """One run; returns its `finished` ledger record (status ok, failed, oom, killed...); with
    run.repeats=N it runs N times and returns the first repeat's record (all are in the ledger)."""
    from repro import preflight
    from repro.job import snapshot

    swept = [key for key, value in overrides.items() if isinstance(value, (list, tuple))]
    if swept:
        raise ConfigError(f"repro.run runs one job, but {', '.join(swept)} is a list (a sweep); "
                          "use repro.sweep(...) for several")
    with snapshot.running(snapshot.take()):  # the run's code and conf/ as they are now
        plan = preflight.plan(_overrides(overrides))
        if plan.multirun or len(plan.jobs) > 1:  # e.g. an exp that sweeps
            raise ConfigError(f"repro.run runs one job, but {' '.join(_overrides(overrides))} plans "
                              f"{len(plan.jobs)} configs (a sweep); use repro.sweep(...) for several")
        admit(plan)
        return run_plan(plan, _overrides(overrides))[0]


def sweep(exp: str | None = None, **overrides: Any) -> list[dict]:
    """Every job of `+exp=EXP` (or of the swept overrides); returns their records in job order."""
    from repro import preflight
    from repro.job import snapshot

    args = ([f"+exp={exp}"] if exp else []) + _overrides(overrides)
    with snapshot.running(snapshot.take()):  # the sweep's code and conf/ as they are now, whatever is edited meanwhile
        plan = preflight.plan(["--multirun", *args])
        admit(plan)
        return run_plan(plan, ["--multirun", *args])


def compare(*ids: str, sweep: str | None = None, experiment: str | None = None, ledger: str | None = None,
            frame: bool = True):
    """The comparison `repro compare` prints, as data: one row per config (report/comparison.py),
    a pandas DataFrame (numbers in seconds, `x_best` ranked by the `by` column's rule), or with
    `frame=False` the list of `Row` dataclasses. Give run ids, `sweep=` or `experiment=`;
    `ledger`: its folder (default: the repo's ledger/, as the CLI)."""
    from dataclasses import asdict, fields

    from repro.ledger import Ledger
    from repro.report import comparison
    from repro.report.compare import changed_lines, newest_sweep, sweep_runs

    if sum(map(bool, (ids, sweep, experiment))) != 1:
        raise ValueError("repro.compare: give run ids, sweep=ID or experiment=NAME (one of them)")
    store = Ledger(ledger)
    records = (sweep_runs(store, sweep) if sweep else newest_sweep(store, experiment) if experiment
               else [store.get(i) for i in ids])
    if changed := changed_lines(store, records):  # as `repro report`: an edited figure is never published
        from repro.ledger import LedgerError

        raise LedgerError("repro.compare: " + "; ".join(changed))
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
