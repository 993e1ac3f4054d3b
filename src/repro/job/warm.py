"""The next jobs' worker interpreters, started ahead (job/launch.py `warm_start`) and each handed
to its job if that job runs the same interpreter, environment, code and backend.

They start while the running job's worker starts, imports and builds, none of which is measured,
and the running job's measured steps wait until they have imported what they import ahead
(`settle`, before the gate: worker/events.py); from then on each blocks on a read of its stdin, so
it runs beside no measured step. The next job then starts from its build: the Python start,
repro's and the framework's imports are off the sweep's path. Two start at a time (AHEAD): the
next job's and the one's after it, whose imports share the machine's cores while the running job
builds, and the next job's start then waits for no import. Where one is not ready within
READY_WAIT_S (an import that hangs), it is ended and its job starts its own worker.

The first job's worker (a single run's, or a sweep's in this process) starts earlier still, before
the command line is planned (`before_plan`), where the same command line was planned before in this
folder: its hint (`hint_stamp`) keeps what that worker was started with and the parent's environment
then. The plan still decides: a worker started from a hint that is not what the plan's first job asks
for, or whose environment has changed since, is ended and one is started as before (`_adopt`, from
`ahead_of_session` for a single run and from the sweep loop's first `start_next`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Sequence

READY_WAIT_S = 20.0
AHEAD = 2  # workers started together in one job's start: the next job's and the one's after it
HINT_FORMAT = 1  # bump when a hint's fields change
HINTS = "warm"  # repro.kept's kind: under <cache>/repro/warm/
KEEP_HINTS = 64  # command lines (and folders) whose workers are kept: the newest


def hint_stamp(argv: Sequence[str]) -> list | None:
    """What a hint is kept under (repro.kept): the interpreter, the folder (a relative path means
    another file there) and the command line, where the ledger and MLflow store it names are
    placeholders as in the compose cache (they start no other worker). None where the command line
    holds a credential: nothing of it reaches a file, its hash included."""
    from repro.config import compose_cache
    from repro.redaction import redact

    if any(redact(a) != a for a in argv):
        return None
    return [HINT_FORMAT, sys.executable, os.getcwd(), compose_cache.with_placeholders(argv)[0]]


def environ_digest() -> str:
    """This process's environment, which a worker inherits beside its own variables (`launch._spawn`),
    as a digest of its redacted text: a credential's value reaches no file, its hash included (a
    worker started early inherits the real value all the same: it starts with this environment)."""
    from repro.redaction import redact

    text = redact("\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
    return hashlib.sha256(text.encode()).hexdigest()


class WarmStart:
    def __init__(self) -> None:
        self.upcoming: list = []  # the jobs after the one running, next first (loop/sweep.py Job: config, place)
        self._warm = None  # the next job's worker
        self._later = None  # the worker of the job after it, started beside the next one's
        self._early = None  # (the worker started before the plan or None, its hint's stamp, the hint read)

    @staticmethod
    def _spawn_args(config, place: dict | None = None) -> dict | None:
        """What a worker started ahead for `config` is started with (`launch.warm_start`'s arguments
        but its folder), in its job's `place` where it runs in another interpreter or code (a
        bisection's commit), or None for a job that starts its worker as usual: with its own venv
        (env.packages) or on several nodes, or where they cannot be worked out (the job's own start
        then says why)."""
        from repro.backends.layouts import process_count
        from repro.job import cluster, launch
        from repro.worker import seeding

        if config.env.packages or config.env.wheelhouse or config.cluster.name != "local":
            return None
        try:
            rdzv = cluster.resolve(config.cluster)
            env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
        except Exception:  # noqa: BLE001 - an early start is an optimisation: the job starts its own
            return None
        where = launch.Place.of(place)
        return dict(python=where.interpreter(config), src=where.src, backend=config.framework.backend,
                    fork=config.run.start == "fork", env=env)

    @staticmethod
    def _start(args: dict):
        """The worker started with `args` (a hint's or `_spawn_args`'), or None where it could not be."""
        from repro.job import launch, snapshot

        try:
            snapshot.ensure_active()  # whole before a worker imports from it (else the job's own check says why)
            return launch.warm_start(launch.make_run_dir(), args["python"], args["env"], args["src"],
                                     backend=args["backend"], fork=args["fork"])
        except Exception:  # noqa: BLE001 - an early start is an optimisation: the job starts its own
            return None

    def start_next(self) -> None:
        """Start the upcoming jobs' workers two at a time: where the next job's worker was started
        beside the one before it, nothing starts now; otherwise the next job's worker and the one's
        after it start together, so that two imports share this machine's cores while the running
        job builds, and the job after needs none (none for a job `_spawn_args` leaves to start as
        usual). A sweep's first call keeps the worker started before its plan, where it is that job's
        (`_adopt`)."""
        upcoming, self.upcoming = (list(self.upcoming or []) + [None] * AHEAD)[:AHEAD], []
        early, self._early = self._early or (None, None, None), None
        if self._warm is None and self._later is not None:  # started beside the last one: the next job's
            self._warm, self._later = self._later, None
        following, after = upcoming
        args = None
        if self._warm is None and following is not None:
            args = self._spawn_args(following.config, following.place)
        self._adopt(*early, args)
        if args is not None and self._warm is not None and after is not None:
            if (later := self._spawn_args(after.config, after.place)) is not None:
                self._later = self._start(later)

    def before_plan(self, argv: Sequence[str]) -> None:
        """Start the worker the same command line's first job was started with last time, where
        this process's environment is what it was then: its Python start and imports then run while
        the command line is composed and checked. Nothing is started without a hint (the first time,
        another launcher, a job `_spawn_args` leaves alone), and `_adopt` keeps it only if the plan's
        first job asks for that very worker."""
        from repro import kept

        stamp = hint_stamp(argv)
        hint = kept.load(HINTS, stamp) if stamp is not None else None
        self._early = (None, stamp, hint)  # without a worker, the hint is made anew once the plan says what to start
        try:
            environ, args = hint["environ"], {**hint["spawn"], "src": None}
        except (TypeError, KeyError):  # none yet, or not one: the plan decides as before
            return
        if environ == environ_digest():
            self._early = (self._start(args), stamp, hint)

    def ahead_of_session(self, plan) -> None:
        """A single run in this process (the command a person types most): its worker starts as soon
        as the plan is checked, so its Python start and imports run while this process makes the
        session (the ledger's estimate, the sweep's id, the source hash), instead of after it; or
        before the plan (`before_plan`), where that worker is the one the plan asks for. A sweep in
        this process starts its first worker from the loop (loop/sweep.py), where its order is known:
        one started before the plan waits for it there (`start_next`). A job that turns out to differ
        (`take` compares the key) or never runs is ended as any other."""
        single = plan.runs == 1 and not plan.multirun and plan.launcher.in_process
        if plan.launcher.in_process and not single:
            return  # the loop's first `start_next` keeps or ends the early worker
        early, self._early = self._early or (None, None, None), None
        self._adopt(*early, self._spawn_args(plan.jobs[0]) if single else None)

    def _adopt(self, early, stamp, hint, args: dict | None) -> None:
        """The first job's worker, from `args` (None: one that starts as usual): the one started before
        the plan where it was started with those very arguments in this environment (else it is ended),
        or one started now; and the command line's hint made or refreshed to say so."""
        from repro import kept
        from repro.job import launch

        if early is not None:
            same = (args is not None and early.key == launch.warm_key(**args)
                    and hint["environ"] == environ_digest() and early.proc.poll() is None)
            if same:
                self._warm = early
            else:
                early.discard()
        if args is not None and self._warm is None:  # none kept from before the plan: its own starts now
            self._warm = self._start(args)
        if stamp is not None and args is not None and self._warm is not None and args["src"] is None:
            made = {"environ": environ_digest(), "spawn": {k: v for k, v in args.items() if k != "src"}}
            if made != hint:
                kept.keep(HINTS, stamp, made, newest=KEEP_HINTS)

    def settle(self) -> None:
        """Before the running job's measured steps: wait until the workers started ahead are ready
        (their imports done), or end them."""
        for warm in (self._warm, self._later):
            if warm is not None and not warm.wait_ready(READY_WAIT_S):
                self.discard()
                return

    def take(self, python: str | None, env: dict[str, str], src, backend: str, fork: bool = False):
        """The worker started ahead, if it was started for this job's interpreter, env, code, backend
        and start (`fork`: run.start=fork)."""
        from repro.job import launch

        warm, self._warm = self._warm, None
        if warm is None:
            return None
        if warm.key == launch.warm_key(python, env, src, backend, fork) and warm.proc.poll() is None:
            return warm
        warm.discard()
        return None

    def discard(self) -> None:
        """A job that will not run (interrupted, failed, resumed, a plan refused): its early worker ends."""
        early, self._early = (self._early or (None,))[0], None
        for warm in (early, self._warm, self._later):
            if warm is not None:
                warm.discard()
        self._warm = self._later = None

