"""The preflight: every job of a command composed and checked before anything runs or is written.

It sits above the run path (it reads the backends' layouts, the cluster and the scheduler to
check a config against them) and below the commands that call it. `config/` keeps the types
the run path shares; what checks them lives here.

    plan = preflight.plan(["-m", "framework=jax,torch"])   # Plan(jobs=(Config, ...), overrides=...)
    config = preflight.check(composed_dictconfig)          # one job's typed, checked Config

Names load on first use: `import repro.preflight` costs nothing until a check runs.
"""

import importlib

_NAMES = {"Plan": "checks", "check": "checks", "plan": "checks", "check_data": "checks",
          "check_tracking_uri": "checks", "check_experiment_name": "checks"}

__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'repro.preflight' has no attribute {name!r}")
    return getattr(importlib.import_module(f"repro.preflight.{_NAMES[name]}"), name)
