"""Framework backends, one module per family, imported by name in the worker only."""

from __future__ import annotations

import importlib

BACKENDS = {"jax": "repro.backends.jax_backend", "torch": "repro.backends.torch_backend",
            "torch_xla": "repro.backends.torch_xla_backend"}


def load(name: str):
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])
