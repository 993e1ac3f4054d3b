"""The Hydra application, kept for Hydra's own flags: `repro --cfg job`, `--info`, `--hydra-help`,
shell completion. Hydra composes and nothing more: every run, whatever the launcher, goes through
the sweep loop (`repro.api.run_jobs`, loop/sweep.py), which hands each round to the launcher's
adapter (loop/rounds.py). `task` is never reached by a run (cli.py runs those itself).
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from repro import paths


def task(cfg: DictConfig) -> None:
    raise RuntimeError("repro runs its jobs through the sweep loop (`python -m repro ...`, repro.api.run_jobs), "
                       "not through Hydra's task function")


def hydra_main() -> None:
    from repro.preflight import search

    search.register_entry_points(sys.argv[1:])  # `model=NAME` of installed packages' `repro.models` entry points
    hydra.main(config_path=str(paths.conf_dir()), config_name="config", version_base="1.3")(task)()
