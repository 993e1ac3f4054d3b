"""The Hydra application: `python -m repro [overrides]` runs one job per composed config."""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from repro import paths
from repro.config import validate


def task(cfg: DictConfig) -> dict:
    from repro.runner.job import run_job
    from repro.sweep import Session

    hc = HydraConfig.get()
    config = validate.check(cfg)
    session = Session.current
    if session is None:
        if str(hc.mode) != "RunMode.MULTIRUN":
            raise RuntimeError("no repro session is open: the hydra.callbacks entry repro_sweep is missing")
        session = Session.attach(config, hc.sweep.dir)  # a launcher ran this job in its own process
    job = int(hc.job.num) if session.multirun else 0
    return run_job(config, session, job, list(hc.overrides.task))


def hydra_main() -> None:
    hydra.main(config_path=str(paths.conf_dir()), config_name="config", version_base="1.3")(task)()
