"""Hydra's callback for a sweep run through Hydra (its own flags, other launchers): it opens the
`Session` (repro/session.py) at the start of a run or multirun and closes it at the end.
conf/config.yaml registers it under hydra.callbacks. A module of its own so that the session,
which the plan path uses without Hydra, does not import Hydra."""

from __future__ import annotations

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from repro.runner import hydra_dirs
from repro.hydra_slot import HYDRA
from repro.session import Session


class SweepCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.run.dir)
        HYDRA.session = Session.open(config, multirun=False, plan=HYDRA.plan)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        hydra_dirs.prune(config.hydra.sweep.dir)
        HYDRA.session = Session.open(config, multirun=True, plan=HYDRA.plan)

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        HYDRA.close()
