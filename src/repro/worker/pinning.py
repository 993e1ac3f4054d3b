"""Cores for the measured worker and for its repro parent, kept apart where the host has enough.

On a host where this process may use MIN_CORES cores or more (its affinity: a SLURM allocation or
a cpuset counts, not the machine's size), the parent takes the first of them and the worker the
rest, so that whatever the parent does (its progress display, its records, a projector or a next
worker it starts: children inherit its cores) never shares a core with the measured steps. The
split is a pure function of the usable cores (`split`); the worker pins itself before it imports
a framework (thread pools size themselves then) and records the split as `machine.pinned`;
`run.threads=null` resolves to the worker's cores. With fewer cores nothing is pinned: one core
for the parent would leave the worker one; there repro runs nothing of its own beside the
measured window instead (worker/machine.py measures that).
"""

from __future__ import annotations

import json
import os

MIN_CORES = 4
PIN_ENV = "REPRO_PINNED"  # the split, as JSON, in the worker's environment

_host: list[int] | None = None
_parent_pinned = False


def split(cpus) -> dict[str, list[int]] | None:
    """{"worker": [cores], "parent": [cores]} for a process that may use `cpus`; None below MIN_CORES."""
    cpus = sorted(set(cpus))
    if len(cpus) < MIN_CORES:
        return None
    return {"worker": cpus[1:], "parent": cpus[:1]}


def host_cpus() -> list[int]:
    """The cores this process could use before it pinned itself (read once)."""
    global _host
    if _host is None:
        _host = sorted(os.sched_getaffinity(0))
    return _host


def worker_cpus() -> list[int]:
    """The cores a worker runs on: its share of the split, or every usable core."""
    if (pinned := recorded()) is not None:  # in a pinned worker
        return pinned["worker"]
    plan = split(host_cpus())
    return plan["worker"] if plan else host_cpus()


def _set_all_threads(cpus: list[int]) -> None:
    """Every thread of this process onto `cpus` (sched_setaffinity(0) moves only the calling thread)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (OSError, ValueError):  # a thread that ended meanwhile
            pass


def pin_parent() -> dict[str, str]:
    """In the parent, before it starts a worker: itself onto its cores (once); the variables the
    worker starts with ({} where nothing is pinned)."""
    global _parent_pinned
    plan = split(host_cpus())
    if plan is None:
        return {}
    if not _parent_pinned:
        _set_all_threads(plan["parent"])
        _parent_pinned = True
    return {PIN_ENV: json.dumps(plan)}


def pin_worker() -> None:
    """In the worker, first thing: onto the worker's cores, where its parent split the host."""
    if (plan := recorded()) is not None:
        _set_all_threads(plan["worker"])


def recorded() -> dict[str, list[int]] | None:
    """The split this worker runs under (its `machine.pinned`), or None."""
    text = os.environ.get(PIN_ENV)
    if not text:
        return None
    try:
        plan = json.loads(text)
        return {"worker": [int(c) for c in plan["worker"]], "parent": [int(c) for c in plan["parent"]]}
    except (ValueError, KeyError, TypeError):
        return None
