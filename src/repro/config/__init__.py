"""Config: the schema (dataclasses) and a run's identity hash; the compose cache.

The checks that turn a composed config into a checked one live one floor up, in
`repro.preflight`. Names load on first use: the worker imports `repro.config.schema` alone.
"""

import importlib

_NAMES = {"ConfigError": "errors", "config_hash": "spec", "semantic": "spec"}

__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'repro.config' has no attribute {name!r}")
    return getattr(importlib.import_module(f"repro.config.{_NAMES[name]}"), name)
