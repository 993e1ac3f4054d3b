"""The Hydra application: `python -m repro [overrides]` runs one job per composed config.

Hydra calls `task` once per job. Jobs of a sweep that Hydra launches (its own flags, or a launcher
that runs jobs in other processes: submitit local or SLURM, joblib) are listed by RepeatSweeper
(hydra_plugins/repro_sweeper) in the sweep loop's order (runner/sweep.py `hydra_order`: each round
in its random order), and each runs through the loop's one per-job function, its `repeat` field
read from its job number. A single run (no -m) runs its `run.repeats` rounds through the loop here.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from repro import paths
from repro import preflight


def task(cfg: DictConfig) -> dict:
    from repro.console import guard_streams
    from repro.hydra_slot import HYDRA
    from repro.runner import sweep
    from repro.session import Session

    guard_streams()  # a launcher's own job process (submitit, joblib) prints as the command does: redacted
    hc = HydraConfig.get()
    config = preflight.check(cfg)
    session = HYDRA.session
    multirun = str(hc.mode) == "RunMode.MULTIRUN"
    if session is None:
        if not multirun:
            raise RuntimeError("no repro session is open: the hydra.callbacks entry repro_sweep is missing")
        # a launcher ran this job in its own process: its later jobs there find the same session
        session = HYDRA.session = Session.attach(config, hc.sweep.dir)
    overrides = list(hc.overrides.task)
    repeats, name = config.run.repeats, session.run_name(config, overrides)
    if not multirun:  # one config: its repeats are the loop's rounds
        policy = sweep.Fixed([(config, overrides)], repeats, session.sweep_id, session.run_name)
        return sweep.run(session, policy, sweep.order_seed(session.sweep_id), config.verdict.max_reruns)[-1]
    if repeats > 1 and not session.jobs:
        raise RuntimeError("run.repeats > 1 needs the sweep's job count: start it with `python -m repro`")
    num = int(hc.job.num)
    fields = {"repeat": sweep.hydra_repeat(num, session.jobs // repeats, repeats, session.sweep_id)} \
        if repeats > 1 else {}
    return sweep.run_one(session, sweep.Job(config, tuple(overrides), name, fields), num)


def hydra_main() -> None:
    from repro.preflight import search

    search.register_entry_points(sys.argv[1:])  # `model=NAME` of installed packages' `repro.models` entry points
    hydra.main(config_path=str(paths.conf_dir()), config_name="config", version_base="1.3")(task)()
