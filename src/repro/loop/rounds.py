"""Launchers as adapters of the one sweep loop: the loop (loop/sweep.py `run`) decides what runs
next (the round's order, reruns, auto's looks, step counts) and hands each round to a launcher,
which runs it and hands back its records. That is the whole protocol:

    class Adapter(Protocol):
        name: str                                   # said in messages (its `hydra/launcher=` choice)
        between_rounds: bool                        # hands a round's records back before the next round
        def run_round(self, host, jobs, first_job_no, hooks=NO_HOOKS) -> list[dict | Lost]: ...
        def close(self) -> None: ...

`run_round` runs `jobs` (the round, in the order the loop drew) one after another, job i as job
number `first_job_no + i`, each through the one per-job function (`run_one`), and
returns one entry per job in that order: its record, or `Lost(reason)` where no record came back
(the allocation ended, a node died); a short list leaves the rest `Lost` too. The loop then looks
for those jobs in the ledger (`settle`): a job that recorded its own end (killed by scancel, a
timeout) counts as recorded; one that did not is recorded `lost` with the launcher's reason.
Nothing already recorded is recorded again.

A launcher that runs the round elsewhere (another process, a SLURM node, a pod) submits
`run_elsewhere(attach, jobs, first_job_no)` there: `attach(config)` gives that process a host of
the same sweep (repro.session `attached`: its id, git state and code, pickled by value), and the
round runs through `InProcess` in it, so its jobs run one after another on one node, in the
round's order, the next job's worker started while one ends. It returns {"started": the time it
started, "records": [...]}; the launcher reads the time the round waited in the queue from it
(`host.queue_s`, which verdict.budget_s does not count) and adopts the records into the parent's
host (`adopt`). loop/submitit_rounds.py (SLURM and submitit's local executor) and
loop/joblib_rounds.py are such launchers, one file each; a Ray or Kubernetes one is the same
shape: submit the function, wait, adopt, return Lost for what did not come back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from repro.job.host import JobHost


@dataclass(frozen=True)
class Lost:
    """A job that handed back no record, and the launcher's reason."""

    reason: str


@dataclass(frozen=True)
class Hooks:
    """What the loop does around each job where the launcher runs it in the loop's own process:
    `before(job)` the job as it will run (a replay's code, the step count its config resolved),
    `after(job, record)` once it ended, `upcoming(i)` the config after job i (its worker starts early).
    A launcher that runs the round elsewhere calls `before` on every job before it submits the round
    and `after` on every record it adopts."""

    before: Callable = field(default=lambda job: job)
    after: Callable = field(default=lambda job, record: None)
    upcoming: Callable = field(default=lambda i: None)


NO_HOOKS = Hooks()


class Adapter(Protocol):
    """A launcher of rounds (module docstring). `between_rounds`: it hands a round's records back
    before the loop decides the next round; one that cannot (a fire-and-forget queue) runs fixed
    rounds only, and `run.repeats=auto` is refused for it (`refusal`)."""

    name: str
    between_rounds: bool

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: Hooks = NO_HOOKS) -> list: ...

    def close(self) -> None: ...


def run_one(host: JobHost, job, number: int) -> dict:
    """The one per-job function: every job of every sweep, whatever launched it, runs here (a round
    the loop (loop/sweep.py) handed to a launcher adapter, in this process or in the launcher's)."""
    from repro.job.job import run_job

    return run_job(job.config, host, number, list(job.overrides), extra=job.fields or None, name=job.name,
                   place=job.place)


class InProcess:
    """The default: the round's jobs one after another in this process (a worker process each),
    the next job's worker started while the current one ends (job/warm.py)."""

    name, between_rounds = "basic", True

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: Hooks = NO_HOOKS) -> list[dict]:
        records = []
        for i, job in enumerate(jobs):
            host.warm.upcoming = hooks.upcoming(i)
            job = hooks.before(job)
            record = run_one(host, job, first_job_no + i)
            records.append(record)
            hooks.after(job, record)
        return records

    def close(self) -> None:
        pass


def refusal(adapter: Adapter, auto: bool) -> str | None:
    """Why a sweep cannot run through `adapter` (None: it can): `run.repeats=auto` decides each round
    from the records of the last, which an adapter that cannot report back between rounds never gives."""
    if auto and not adapter.between_rounds:
        return (f"run.repeats=auto decides each round from the records of the last, but hydra/launcher={adapter.name} "
                "does not hand a round's records back before the next round is submitted; give a count "
                "(run.repeats=5), or a launcher that reports back (basic, submitit_local, submitit_slurm, joblib)")
    return None


def run_elsewhere(attach: Callable, jobs: Sequence, first_job_no: int) -> dict:
    """A round in a launcher's own process (a SLURM node, a local job): a host of the sweep attached
    here, the jobs run one after another through `InProcess`, a config's later runs in the round at
    the step count its first run resolved (run.steps=auto: calibrate's two labels of one config, a
    round the parent had no count for yet). Returns when it started and the
    records; an interrupt (SLURM's SIGTERM, Ctrl-C) ends the round with the records so far (`interrupted`)."""
    from repro.console import guard_streams
    from repro.loop.step_counts import StepCounts

    guard_streams()  # prints as the command does: redacted
    started = time.time()
    host = attach(jobs[0].config)
    following = [j.config for j in jobs[1:]] + [None]
    records: list = []
    interrupted = False
    counts = StepCounts()  # run.steps=auto: the round's later runs of a config take its first run's count

    def before(job):
        return job if "steps_resolved" in (job.fields or {}) else counts.take(job)

    try:
        records = InProcess().run_round(host, jobs, first_job_no,
                                        Hooks(before=before, after=counts.resolve, upcoming=lambda i: following[i]))
    except KeyboardInterrupt:  # the job that was running recorded how it ended; the rest did not run
        records, interrupted = list(host.records), True
    finally:
        host.warm.discard()
    if not interrupted:
        host.round_ended()  # its runs into MLflow once (SLURM ending the job: left for `repro sync`)
    return {"started": started, "ended": time.time(), "records": records, "interrupted": interrupted}


def adopt(host: JobHost, jobs: Sequence, first_job_no: int, result: dict | None, reason: str,
          submitted: float, hooks: Hooks = NO_HOOKS, shown: bool = False) -> list:
    """The parent's side of a round run elsewhere: its queue time counted apart (`host.queue_s`), each
    record it handed back adopted into `host` (its records, the progress), `Lost(reason)` for the rest.
    `shown`: the round's process printed its jobs' ends to this command's terminal already (joblib)."""
    if result is None:
        return [Lost(reason)] * len(jobs)
    host.queue_s += max(0.0, result["started"] - submitted)
    out: list = []
    for i, job in enumerate(jobs):
        record = result["records"][i] if i < len(result["records"]) else None
        if record is None:
            out.append(Lost(reason))
            continue
        if not shown:
            host.display.job_finished(first_job_no + i, record)
        host.finished(record)
        hooks.after(job, record)
        out.append(record)
    return out


def settle(host: JobHost, jobs: Sequence, first_job_no: int, results: Sequence) -> list[dict]:
    """Every job of a round with its record: a `Lost` (or missing) entry is read from the ledger
    (the job recorded its own end before its allocation ended: that record), else recorded `lost`
    now with the launcher's reason (after its `started` record where it has one)."""
    lost = [r for r in results if isinstance(r, Lost)]  # a short list: the rest lost for the launcher's last reason
    results = list(results) + (lost[-1:] or [Lost("the launcher handed back no record")]) * (len(jobs) - len(results))
    if not any(isinstance(r, Lost) for r in results):
        return list(results)
    from repro.ledger import Ledger

    ledger = Ledger(host.ledger_dir)
    mine: dict[int, list[dict]] = {}
    for r in ledger.records():
        sweep = r.get("sweep") or {}
        if r.get("kind") == "run" and sweep.get("id") == host.sweep_id:
            mine.setdefault(sweep.get("job"), []).append(r)
    out = []
    for i, (job, result) in enumerate(zip(jobs, results)):
        if not isinstance(result, Lost):
            out.append(result)
            continue
        number, found = first_job_no + i, sorted(mine.get(first_job_no + i, []), key=lambda r: r.get("created", ""))
        ended = [r for r in found if r.get("status") != "started"]
        if ended:
            record = ended[-1]
        else:
            record = _lost(ledger, host, job, number, result.reason, found[-1] if found else None)
        host.display.job_finished(number, record)
        host.finished(record)
        out.append(record)
    return out


def _lost(ledger, host: JobHost, job, number: int, reason: str, started: dict | None) -> dict:
    from repro.config import config_hash
    from repro.config.schema import as_dict

    if started is not None:
        base = {k: v for k, v in started.items() if k not in ("id", "created", "status", "parent")}
        base["prev"] = started["id"]
    else:
        base = {"kind": "run", "config_hash": config_hash(as_dict(job.config)), "config": as_dict(job.config),
                "overrides": list(job.overrides), "sweep": host.sweep_info(number), "git": host.git,
                "code": host.code, **(job.fields or {})}
    return ledger.append({**base, "status": "lost", "error": {"reason": f"lost: {reason}"}})
