"""Launchers as adapters of the one sweep loop: the loop (loop/sweep.py `run`) decides what runs
next (the round's order, reruns, auto's looks, step counts) and hands each round to a launcher,
which runs it and hands back its records. That is the whole protocol:

    class Adapter(Protocol):
        name: str                                   # said in messages (its `hydra/launcher=` choice)
        between_rounds: bool                        # hands a round's records back before the next round
        at_once: int                                # rounds it may run at the same time (1: one by one)
        in_process: bool                            # runs the round in the loop's own process
        def run_round(self, host, jobs, first_job_no, hooks=NO_HOOKS) -> list[dict | Lost]: ...
        def run_rounds(self, host, batches) -> list[list[dict | Lost]]: ...   # `at_once` rounds together
        def close(self) -> None: ...

Each adapter is registered once, beside it, as a launcher (loop/launchers.py `@launcher`: its
`hydra/launcher=` name, its Hydra `_target_`, where its rounds run, what it imports); `Elsewhere`
gives the defaults of an adapter that runs rounds in another process, one at a time.

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
round's order, the next job's worker started while one ends. It returns a `RoundResult` (when it
started, its records); the launcher reads the time the round waited in the queue from it
(`host.queue_s`, which verdict.budget_s does not count) and adopts the records into the parent's
host (`adopt`). loop/submitit_rounds.py (SLURM and submitit's local executor) and
loop/joblib_rounds.py and loop/ray_rounds.py are such launchers, one file each; a Kubernetes one
is the same shape: submit the function, wait, adopt, return Lost for what did not come back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from repro.job import forked
from repro.job.host import JobHost
from repro.loop.launchers import HERE, Launch, launcher


def view(record: dict):
    """The record's typed view (ledger/record.py), imported on first use: every single run's preflight
    imports this module for its default launcher (loop/launchers.py `parse`), before its worker starts,
    and the record module's typed dataclasses took ~40 ms of that path on the 2-core reference machine."""
    from repro.ledger.record import view as typed

    return typed(record)


@dataclass(frozen=True)
class Lost:
    """A job that handed back no record, and the launcher's reason; `status`: what `settle` records it as
    when the ledger holds no end of its own (`killed` where the scheduler says it ended the job: scancel)."""

    reason: str
    status: str = "lost"


@dataclass(frozen=True)
class RoundResult:
    """What a round run elsewhere hands back to the launcher's process (pickled there): when it started
    and ended (wall clock, time.time()), each job's record in the round's order, as far as it ran, and
    whether an interrupt (SLURM's SIGTERM, Ctrl-C) ended it early."""

    started: float
    ended: float
    records: list
    interrupted: bool = False


def taken(host: JobHost) -> list[str]:
    """run.resume=true: the ids of the records the sweep counted already, which a round elsewhere never takes again."""
    return [view(r).id for r in host.records]


@dataclass(frozen=True)
class Hooks:
    """What the loop does around each job where the launcher runs it in the loop's own process:
    `before(job)` the job as it will run (a replay's code, the step count its config resolved),
    `after(job, record)` once it ended, `upcoming(i)` the jobs after job i, next first (their workers
    start early, each with its config and place).
    A launcher that runs the round elsewhere calls `before` on every job before it submits the round
    and `after` on every record it adopts."""

    before: Callable = field(default=lambda job: job)
    after: Callable = field(default=lambda job, record: None)
    upcoming: Callable = field(default=lambda i: [])


NO_HOOKS = Hooks()


class Adapter(Protocol):
    """A launcher of rounds (module docstring): everything the loop reads of it. `between_rounds`: it
    hands a round's records back before the loop decides the next round; one that cannot (a
    fire-and-forget queue) runs fixed rounds only, and `run.repeats=auto` is refused for it
    (`refusal`). `at_once` > 1: the loop may hand it that many rounds together (`run_rounds`).
    `in_process`: the round runs in the loop's process, so the loop starts the first job's worker
    ahead (job/warm.py)."""

    name: str
    between_rounds: bool
    at_once: int
    in_process: bool

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: Hooks = NO_HOOKS) -> list: ...

    def run_rounds(self, host: JobHost, batches: Sequence) -> list[list]: ...

    def close(self) -> None: ...


class Elsewhere:
    """The defaults of an adapter whose rounds run in another process, one round at a time, each
    handed back before the next (`between_rounds`): subclasses give `name` and `run_round`."""

    name: str
    between_rounds, at_once, in_process = True, 1, False

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: Hooks = NO_HOOKS) -> list:
        raise NotImplementedError

    def run_rounds(self, host: JobHost, batches: Sequence) -> list[list]:
        """Rounds handed over together ((jobs, first_job_no, hooks) each), run one after another."""
        return [self.run_round(host, jobs, no, hooks) for jobs, no, hooks in batches]

    def close(self) -> None:
        pass


def run_one(host: JobHost, job, number: int) -> dict:
    """The one per-job function: every job of every sweep, whatever launched it, runs here (a round
    the loop (loop/sweep.py) handed to a launcher adapter, in this process or in the launcher's)."""
    from repro.job.job import run_job

    return run_job(job.config, host, number, list(job.overrides), extra=job.fields or None, name=job.name,
                   place=job.place)


class InProcess(Elsewhere):
    """The default: the round's jobs one after another in this process (a worker process each),
    the next job's worker started while the current one ends (job/warm.py)."""

    name, in_process = "basic", True

    def run_round(self, host: JobHost, jobs: Sequence, first_job_no: int, hooks: Hooks = NO_HOOKS) -> list[dict]:
        records = []
        for i, job in enumerate(jobs):
            host.warm.upcoming = hooks.upcoming(i)
            job = hooks.before(job)
            record = run_one(host, job, first_job_no + i)
            records.append(record)
            hooks.after(job, record)
        return records



@launcher("basic", target="hydra._internal.core_plugins.basic_launcher.BasicLauncher", where=HERE)
def _in_process(launch: Launch | None = None) -> InProcess:
    return InProcess()


def refusal(adapter: Adapter, auto: bool) -> str | None:
    """Why a sweep cannot run through `adapter` (None: it can): `run.repeats=auto` decides each round
    from the records of the last, which an adapter that cannot report back between rounds never gives."""
    if auto and not adapter.between_rounds:
        return (f"run.repeats=auto decides each round from the records of the last, but hydra/launcher={adapter.name} "
                "does not hand a round's records back before the next round is submitted; give a count "
                "(run.repeats=5), or a launcher that hands each round back before the next (basic, the default, does)")
    return None


def run_elsewhere(attach: Callable, jobs: Sequence, first_job_no: int, taken: Sequence[str] = (), nth: int = 0,
                  stop: str | None = None) -> RoundResult:
    """A round in a launcher's own process (a SLURM node, a local job): a host of the sweep attached
    here, the jobs run one after another through `InProcess`, a config's later runs in the round at
    the step count its first run resolved (run.steps=auto: calibrate's two labels of one config, a
    round the parent had no count for yet). Returns when it started and the
    records; an interrupt (SLURM's SIGTERM, Ctrl-C) ends the round with the records so far (`interrupted`).
    `taken`, `nth`: run.resume=true never takes a record the sweep counted already (`taken`, its ids),
    and passes over `nth` more of each config (the rounds handed over at once before it: job/resume.py).
    `stop`: the folder of a `Stop`: this process hears Ctrl-C from its launcher, once."""
    from repro.console import guard_streams
    from repro.job.warm import AHEAD
    from repro.loop.step_counts import StepCounts

    guard_streams()  # prints as the command does: redacted
    started = time.time()
    host, records, interrupted = None, [], False
    counts = StepCounts()  # run.steps=auto: the round's later runs of a config take its first run's count
    listening = Stop(stop).listen() if stop else None
    try:
        if listening is not None:
            listening.check()  # asked to stop before it listened
        host = attach(jobs[0].config)
        host.resume_taken, host.resume_nth = set(taken), nth
        following = list(jobs[1:])

        def before(job):
            return job if "steps_resolved" in (job.fields or {}) else counts.take(job)

        records = InProcess().run_round(host, jobs, first_job_no,
                                        Hooks(before=before, after=counts.resolve, upcoming=lambda i: following[i:i + AHEAD]))
    except KeyboardInterrupt:  # the job that was running recorded how it ended; the rest did not run
        records, interrupted = list(host.records) if host is not None else [], True
    finally:
        if host is not None:
            host.warm.discard()
        forked.close_all()  # run.start=fork: this round's servers (a Ray worker outlives its rounds)
        if listening is not None:
            listening.close()
    if not interrupted:
        host.round_ended()  # its runs into MLflow once (SLURM ending the job: left for `repro sync`)
    return RoundResult(started, time.time(), records, interrupted)


class Stop:
    """Ctrl-C for rounds that run in other processes of this host (submitit_local, joblib), as the
    default launcher takes it: the job that runs records `interrupted`, the round's later jobs do not
    run, its records come back, the sweep ends. The launching command alone takes the terminal's
    Ctrl-C (submitit's controller is started with SIGINT ignored, so it prints no traceback and kills
    nothing); it then asks each round process once, through this folder: SIGINT to each process
    listening (`pid-N`), and `asked` for one not yet listening, which stops as it starts to. A round
    process hears one interrupt, whichever comes first, and ignores the rest (the terminal's own
    Ctrl-C, where it shares the terminal's process group, would otherwise interrupt its recording)."""

    WAIT_S = 120.0  # how long the launching command waits for the interrupted rounds' records

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    @classmethod
    def under(cls, parent: Path) -> "Stop":
        import tempfile

        parent.mkdir(parents=True, exist_ok=True)
        return cls(tempfile.mkdtemp(prefix="repro-stop-", dir=parent))

    def ask(self) -> int:
        """Every round process listening asked to stop (SIGINT, once each); how many were."""
        import os
        import signal

        (self.folder / "asked").touch()
        asked = 0
        for pid_file in self.folder.glob("pid-*"):
            try:
                os.kill(int(pid_file.name[4:]), signal.SIGINT)
                asked += 1
            except (ValueError, OSError):  # ended meanwhile
                pass
        return asked

    def listen(self) -> "_Listening":
        return _Listening(self.folder)

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


class _Listening:
    """A round process's side of `Stop`."""

    def __init__(self, folder: Path):
        import os
        import signal
        import threading

        self.asked, self.file = folder / "asked", folder / f"pid-{os.getpid()}"
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            signal.signal(signal.SIGINT, self._once)
        self.file.touch()

    @staticmethod
    def _once(signum, frame) -> None:
        import signal

        from repro.worker import lifeline

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # heard once: a second one would cut the record short
        lifeline.interrupt(signum, frame)

    def check(self) -> None:
        if self.asked.exists():
            self._once(None, None)

    def close(self) -> None:
        import signal

        self.file.unlink(missing_ok=True)
        if self.main:  # between rounds (a joblib worker waits for the next): only its launcher stops it
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def adopt(host: JobHost, jobs: Sequence, first_job_no: int, result: RoundResult | None, reason: str | Lost,
          submitted: float, hooks: Hooks = NO_HOOKS, shown: bool = False) -> list:
    """The parent's side of a round run elsewhere: its queue time counted apart (`host.queue_s`), each
    record it handed back adopted into `host` (its records, the progress), `Lost(reason)` for the rest.
    `shown`: the round's process printed its jobs' ends to this command's terminal already (joblib)."""
    lost = reason if isinstance(reason, Lost) else Lost(reason)
    if result is None:
        return [lost] * len(jobs)
    host.queue_s += max(0.0, result.started - submitted)
    out: list = []
    for i, job in enumerate(jobs):
        record = result.records[i] if i < len(result.records) else None
        if record is None:
            out.append(lost)
            continue
        if not shown and "resumed_from" in record:  # said as a job resumed in this process says it
            from repro.job.resume import say_skipped

            say_skipped(job.name, view(record).id)
        elif not shown:
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
        sweep = view(r).sweep
        if view(r).kind == "run" and sweep.id == host.sweep_id:
            mine.setdefault(sweep.job, []).append(r)
    out = []
    for i, (job, result) in enumerate(zip(jobs, results)):
        if not isinstance(result, Lost):
            out.append(result)
            continue
        number, found = first_job_no + i, sorted(mine.get(first_job_no + i, []), key=lambda r: view(r).created)
        ended = [r for r in found if view(r).status != "started"]
        if ended:
            record = ended[-1]
        else:
            record = _lost(ledger, host, job, number, result, found[-1] if found else None)
        host.display.job_finished(number, record)
        host.finished(record)
        out.append(record)
    return out


def _lost(ledger, host: JobHost, job, number: int, lost: Lost, started: dict | None) -> dict:
    from repro.config import config_hash
    from repro.config.schema import as_dict

    if started is not None:
        base = {**{k: v for k, v in started.items() if k not in ("id", "created", "status", "parent")},
                "prev": view(started).id}
    else:
        base = {"kind": "run", "config_hash": config_hash(as_dict(job.config)), "config": as_dict(job.config),
                "overrides": list(job.overrides), "sweep": host.sweep_info(number), "git": host.git,
                "code": host.code, **(job.fields or {})}
    # the reason alone: the status leads every line that shows it ("lost: lost: …" once read so)
    return ledger.append({**base, "status": lost.status, "error": {"reason": lost.reason}})
