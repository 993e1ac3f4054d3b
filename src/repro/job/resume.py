"""`run.resume=true`: a job whose result is already recorded on this environment is not run again.

A job is skipped when the ledger holds an `ok` run with its config hash and this
environment's fingerprint. The worker computes fingerprints (they include the framework's
devices), so the parent recomputes one without importing a framework: this host's Python,
CPU, ISA, cores, GPUs and package versions (importlib.metadata), the variables the worker
would start with (plus those its framework set itself on import, as recorded), and the
recorded run's device list (the same packages on the same machine
see the same devices). A job run by another interpreter (framework.python) is never skipped:
the parent cannot read that interpreter's packages. A mismatch costs a rerun, never a wrong skip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os

from repro.ledger import Ledger
from repro.worker import envcapture

if TYPE_CHECKING:
    from repro.config.schema import Config


def fingerprint_here(worker_env: dict[str, str], recorded_env: dict) -> str:
    env = envcapture.capture({"devices": (recorded_env.get("framework") or {}).get("devices")})
    start = {**os.environ, **worker_env}
    # Variables a framework sets itself on import (JAX: TPU_SKIP_MDS_QUERY) come with its version.
    added = {k: v for k, v in (recorded_env.get("variables") or {}).items() if k not in start}
    env["variables"] = {**envcapture.result_variables(start), **added}
    return envcapture.fingerprint(env)


def recorded_ok(config: Config, chash: str, ledger: Ledger, worker_env: dict[str, str],
                counted: set[str] = frozenset()) -> dict | None:
    """The newest `ok` record of this config on this environment, when the config asks to resume;
    `counted`: ids the sweep already counted (a repeated config's rounds each take a record of their
    own, once: a record is never one sweep's result twice)."""
    if not config.run.resume or config.framework.python:
        return None
    heads = ledger.heads()
    # a round's attempt that a rerun replaced (telemetry flagged it) is no result: never reused
    # (report/reruns.py `replaced`, which this floor cannot import)
    replaced = {i for r in heads for i in (r.get("repeat") or {}).get("replaces", ())}
    for record in reversed(heads):
        env = record.get("environment")
        if record.get("id") in counted or record.get("id") in replaced:
            continue
        if (record.get("kind") == "run" and record.get("status") == "ok" and record.get("config_hash") == chash
                and env and fingerprint_here(worker_env, env) == env["fingerprint"]):
            return record
    return None
