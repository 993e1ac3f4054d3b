"""The Hydra application: `python -m repro [overrides]` runs one job per composed config.

`run.repeats=N` runs each config N times in fresh workers: in a sweep RepeatSweeper
(repro/sweeper.py) lists every job N times, interleaved, and a job's number says which
repeat it is; a single run (no -m) runs its N repeats here, one after the other.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from repro import paths
from repro import preflight
from repro.sweeper import repeat_of


def task(cfg: DictConfig) -> dict:
    from repro.console import guard_streams
    from repro.runner.job import run_job
    from repro.hydra_slot import HYDRA
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
    repeats = config.run.repeats
    if repeats == 1:
        return run_job(config, session, int(hc.job.num) if session.multirun else 0, overrides,
                       name=session.run_name(config, overrides))
    if not session.jobs:
        raise RuntimeError("run.repeats > 1 needs the sweep's job count: start it with `python -m repro`")
    jobs = [int(hc.job.num)] if multirun else range(repeats)
    for job in jobs:
        record = run_job(config, session, job, overrides, name=session.run_name(config, overrides),
                         extra={"repeat": repeat_of(job, session.jobs, repeats, session.sweep_id)})
    return record


def hydra_main() -> None:
    from repro.preflight import search

    search.register_entry_points(sys.argv[1:])  # `model=NAME` of installed packages' `repro.models` entry points
    hydra.main(config_path=str(paths.conf_dir()), config_name="config", version_base="1.3")(task)()
