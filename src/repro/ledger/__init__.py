"""The append-only, content-hashed, git-tracked record of every run attempt.

Names load on first use (`from repro.ledger import Ledger` as ever): a command that only checks a
ledger folder (`repro.ledger.place`, the preflight's) imports none of the store, its verification
and their process pools (~20 ms of a single run's start, before its worker could).
"""

import importlib

_NAMES = {"SCHEMA": "schema", "SCHEMA_VERSION": "schema", "RunState": "state", "state_of": "state",
          "Ledger": "store", "LedgerError": "store", "Problem": "store", "Recovery": "store",
          "Verification": "store", "record_id": "store"}

__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'repro.ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"repro.ledger.{_NAMES[name]}"), name)
    globals()[name] = value
    return value
