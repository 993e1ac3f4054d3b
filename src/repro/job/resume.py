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

import dataclasses
import os

from repro.ledger import Ledger
from repro.ledger.record import Environment, view
from repro.worker import envcapture

if TYPE_CHECKING:
    from repro.config.schema import Config


def fingerprint_here(worker_env: dict[str, str], recorded: Environment) -> str:
    """This machine's environment fingerprint for a worker started with `worker_env`, beside a recorded one
    (its devices, and the variables its framework set itself)."""
    here = envcapture.Captured.here({"devices": recorded.framework.get("devices")})
    start = {**os.environ, **worker_env}
    # Variables a framework sets itself on import (JAX: TPU_SKIP_MDS_QUERY) come with its version.
    added = {k: v for k, v in recorded.variables.items() if k not in start}
    return dataclasses.replace(here, variables={**envcapture.result_variables(start), **added}).fingerprint


def taken(host) -> tuple[set[str], int]:
    """What a sweep's host counted already: the ids of its records, and of the records its launcher's
    earlier rounds took (a round run elsewhere: loop/rounds.py `run_elsewhere`); and how many more of
    each config's records are left to the rounds handed over at once before this one (`nth`)."""
    return ({view(r).id for r in host.records} | set(getattr(host, "resume_taken", ())),
            int(getattr(host, "resume_nth", 0)))


def say_skipped(name: str, record_id: str) -> None:
    """The line of a job that `run.resume=true` skipped, in the process that skipped it or, for a round
    run elsewhere whose output the command's terminal does not show, in the launching command."""
    from repro.console import console
    from repro.usertext import markup

    console().print(f"resume: {markup(name)} skipped, already recorded ok on this environment (ledger {record_id})")


def recorded_ok(config: Config, chash: str, ledger: Ledger, worker_env: dict[str, str],
                counted: set[str] = frozenset(), nth: int = 0) -> dict | None:
    """The newest `ok` record of this config on this environment, when the config asks to resume;
    `counted`: ids the sweep already counted (a repeated config's rounds each take a record of their
    own, once: a record is never one sweep's result twice); `nth`: how many more to pass over (rounds
    handed to a launcher at once take the first, second, ... record each, not one record all)."""
    if not config.run.resume or config.framework.python:
        return None
    heads = ledger.heads()
    # a round's attempt that a rerun replaced (telemetry flagged it) is no result: never reused
    # (report/reruns.py `replaced`, which this floor cannot import)
    replaced = {i for r in heads for i in view(r).repeat.replaces}
    for record in reversed(heads):
        rec = view(record)
        if rec.id in counted or rec.id in replaced:
            continue
        env = rec.environment
        if (rec.kind == "run" and rec.status == "ok" and rec.config_hash == chash
                and env.raw and fingerprint_here(worker_env, env) == env.fingerprint):
            if nth == 0:
                return record
            nth -= 1
    return None
