"""Hydra's callback for a sweep run through Hydra (its own flags, other launchers): it opens the
`Session` (repro/session.py) at the start of a run or multirun and closes it at the end.
conf/config.yaml registers it under hydra.callbacks. A module of its own so that the session,
which the plan path uses without Hydra, does not import Hydra."""

from __future__ import annotations

import json
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from repro import preflight
from repro.hydra_slot import HYDRA
from repro.config.launcher import Launcher
from repro.runner import cluster, hydra_dirs, scheduler
from repro.session import SESSION_FILE, SHARED, Session


def open_session(config: DictConfig, multirun: bool, plan=None) -> Session:
    """The session of a Hydra run or multirun (`config`: Hydra's composed config), `plan` its
    checked jobs (None: checked here). Under a launcher that runs jobs in their own processes, the
    session's identity goes into the sweep folder for them to attach to."""
    primary = plan.jobs[0] if plan and plan.jobs else \
        preflight.check(OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"]))
    session = Session(primary, multirun or primary.run.repeats > 1, plan)
    launcher = Launcher.parse(str(config.hydra.launcher.get("_target_", "")) if "hydra" in config else "")
    folder = Path(str(config.hydra.sweep.dir)) if multirun else None
    if multirun and launcher.slurm:
        scheduler.sacct_stand_in(folder)  # where accounting is off
    if multirun and not launcher.in_process and not cluster.is_follower(primary.cluster):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SESSION_FILE).write_text(json.dumps({k: getattr(session, k) for k in SHARED}))
    return session


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.run.dir)
        HYDRA.session = open_session(config, multirun=False, plan=HYDRA.plan)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.sweep.dir)
        HYDRA.session = open_session(config, multirun=True, plan=HYDRA.plan)

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()
