"""The words for a stored record's blocks: how its `scheduler` and `wall_split` blocks read to a person
(`repro ledger show`, the report), to MLflow (tags) and to replay (where a run ran).

These read what job/ wrote; they live on the read side so that the readers (report/, ledger/,
tracking/, replay) do not reach up into the run path for them, and so that a record whose writer
has changed still reads. job/ captures the blocks (job/scheduler.py `block`, job/wall_split.py `split`).
"""

from __future__ import annotations

from typing import Any, Mapping

# The parts of a worker's wall (job/wall_split.py `split`), in the order a run goes through them, as a person reads them.
WALL_PARTS = {
    "start": "worker start and imports",
    "data": "data",
    "build": "model build and weight placement",
    "setup": "environment capture, the canary, and waiting for the parent (its tracking, the next job's worker started ahead)",
    "first_step": "first step (trace, compile, execute)",
    "steady": "steady steps (every step after the first)",
    "results": "results (hashes, evaluation, FLOPs, IR)",
    "profile": "profiled steps (run.profile)",
    "handover": "results to the parent and the worker's word that it exits",
}

# What of a scheduler block says where a run ran (not its ids, logs or attempt): replay lists a difference in these.
WHERE = ("name", "cluster", "partition", "nodes", "resources")


def _name(sched: Mapping | None) -> str:
    return str((sched or {}).get("name") or "local")


def _words(key: str) -> str:
    """A block key as a person reads it: `task_id` -> `task`, `array_job_id` -> `array job`."""
    return key.removesuffix("_id").replace("_", " ")


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _slurm(sched: Mapping) -> str:
    parts = [f"slurm job {sched.get('job_id', '?')}"
             + (f" (array {sched['array_job_id']}_{sched['array_task_id']})" if "array_task_id" in sched else "")
             + f" step {sched.get('step_id', '?')}"]
    parts += [f"{k} {sched[k]}" for k in ("nodes", "partition", "account", "qos") if sched.get(k)]
    res = sched.get("resources") or {}
    if res:
        parts.append(_value(res))
    if sched.get("attempt", 1) > 1:
        parts.append(f"attempt {sched['attempt']}")
    if sched.get("stdout"):
        parts.append(f"log {sched['stdout']}")
    return " · ".join(parts)


def scheduler(sched: Mapping | None) -> str:
    """One line for a person: `local`; SLURM's `slurm job 12 (array 11_1) step 0 · nodes n[1-2] · partition both · ...`;
    any other scheduler's block its name and job, then the ids of the job's parts, its node(s) and the rest it recorded:
    `ray job 01000000 · task ab12 · node host1 · address 127.0.0.1:6379`."""
    name = _name(sched)
    if not sched:
        return name
    if name == "slurm":
        return _slurm(sched)
    head = name + (f" job {sched['job_id']}" if sched.get("job_id") not in (None, "") else "")
    keys = [k for k, v in sched.items() if k not in ("name", "job_id") and v not in (None, "", {}, [])]
    # the job's parts (ids) first, then where it ran, then the rest as recorded (a stored record's keys are sorted)
    keys.sort(key=lambda k: 0 if k.endswith("_id") else 1 if k in ("node", "nodes") else 2)
    return " · ".join([head, *(f"{_words(k)} {_value(sched[k])}" for k in keys)])


def scheduler_tags(sched: Mapping | None) -> dict[str, str]:
    """The block as MLflow tags: `repro.scheduler` (its name) and `repro.scheduler.<key>` (resources flattened)."""
    out = {"repro.scheduler": _name(sched)}
    for key, value in (sched or {}).items():
        if isinstance(value, Mapping):
            out.update({f"repro.scheduler.{key}.{k}": str(v) for k, v in value.items()})
        elif key != "name":
            out[f"repro.scheduler.{key}"] = str(value)
    return out


def scheduler_where(sched: Mapping | None) -> dict:
    """What of a block says where a run ran (for replay's differences): not its ids, logs or attempt."""
    sched = sched or {"name": "local"}
    return {k: v for k, v in sched.items() if k in WHERE}


def others_took(other: float, steal: float | None) -> str:
    """What the machine's other CPU during a run's window was, in words: `other` (cores, the
    machine block's `other_cpu_share`) counts the hypervisor's steal too (`steal_share`: another
    tenant had these cores), so where the steal is all of it no process of this machine is to blame."""
    if steal and steal >= other:
        return f"the hypervisor gave {steal:.2f} of a core to another tenant (steal)"
    if steal and steal >= 0.005:
        return f"other processes took {other:.2f} of a core, {steal:.2f} of it the hypervisor's steal"
    return f"other processes took {other:.2f} of a core"
