"""Config: the schema (dataclasses), checks before running, and a run's identity hash.

Names load on first use: the worker imports `repro.config.schema` alone, and must not pay for
OmegaConf and Hydra (`validate`), which only the parent uses.
"""

import importlib

_NAMES = {"ConfigError": "schema", "config_hash": "spec", "semantic": "spec",
          "Plan": "validate", "check": "validate", "plan": "validate"}

__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'repro.config' has no attribute {name!r}")
    return getattr(importlib.import_module(f"repro.config.{_NAMES[name]}"), name)
