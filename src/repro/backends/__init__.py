"""Framework backends, one module per family, imported by name in the worker only; what each can do
is declared in `backends.capabilities` (plain data, read without importing any framework)."""

from __future__ import annotations

import importlib

from repro.backends.capabilities import BACKENDS as CAPABILITIES

BACKENDS = {name: caps.module for name, caps in CAPABILITIES.items()}


def load(name: str):
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])
