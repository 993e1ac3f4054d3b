"""One job, parent side: ledger "started" → MLflow child run → worker → results recorded.

On a node other than node 0 of a multi-node run, the job only runs its worker (whose
processes join node 0's rendezvous): node 0 records the run, once.

Whatever the worker does (finishes, fails, runs out of memory, is killed), and whatever
the parent meets (Ctrl-C or SIGTERM, a full disk), the job ends with a "finished" ledger
record naming the "started" one, written before MLflow is told (tracking/project.py): a
tracking store that is down costs a warning, and `repro sync` fills it in later.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from repro import __version__, paths
from repro.console import console as terminal
from repro.backends.layouts import process_count
from repro.config import config_hash
from repro.config.schema import Config, as_dict
from repro.config.workerspec import WorkerSpec
from repro.ledger import Ledger, LedgerError
from repro.ledger.record import view
from repro.ledger.schema import SCHEMA_VERSION
from repro.ledger.store import now_iso, record_id
from repro.envs import runs as envs_runs
from repro.envs.venvs import EnvError
from repro.envs import workload_source
from repro.job import canary, cluster, launch, resume, scheduler, snapshot, spool, wall_split
from repro.worker import envcapture, lifeline, seeding
from repro.blocks import typed
from repro.job.host import JobHost
from repro.usertext import markup

LEDGER_RETRIES, LEDGER_RETRY_S = 3, 0.5


def _cache_dir(config: Config, run_dir: Path, chash: str, sweep_id: str | None) -> str:
    """The run's compile cache (backends/compile_cache.py): its own (cold), the framework's shared one
    (warm), or its config's within this sweep (repeats: the first run fills it, its repeats reuse it)."""
    if config.run.compile_cache == "cold" or config.run.compile_cache == "repeats" and not sweep_id:
        return str(run_dir / "compile-cache")
    path = paths.cache_root() / "compile" / config.framework.backend
    if config.run.compile_cache == "repeats":
        path = paths.cache_root() / "compile" / "repeats" / sweep_id / chash
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def _run_worker(config: Config, chash: str, rdzv: cluster.Rendezvous, run_dir: Path, env: dict[str, str],
                on_event, place: dict | None = None, beside_start=None, warm=None, gap: float = 0.0,
                steps: int | None = None, sweep_id: str | None = None) -> launch.WorkerOutcome:
    spec_path = WorkerSpec(config, chash, str(run_dir), _cache_dir(config, run_dir, chash, sweep_id), rdzv,
                           injected_gap=gap, steps=steps).write(launch.spec_path_of(run_dir))
    where = launch.Place.of(place)
    return launch.run_worker(spec_path, run_dir / "worker.log", where.interpreter(config),
                             env, config.run.timeout_s, on_event, where.src, beside_start, warm,
                             config.tracking.projector_wait_s,
                             fork=config.framework.backend if config.run.start == "fork" else None)


def run_follower(config: Config, rdzv: cluster.Rendezvous, name: str) -> dict:
    """A node other than node 0: its processes join the run; node 0 alone records it."""
    console = terminal()
    console.print(f"node {rdzv.node_rank} of {rdzv.nodes}: {markup(name)} joins the run at {rdzv.endpoint}; "
                  "node 0 records it")
    run_dir = launch.make_run_dir()
    try:
        env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
        outcome = _run_worker(config, config_hash(as_dict(config)), rdzv, run_dir, env, lambda ev: None)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if outcome.status != "ok":
        raise RuntimeError(f"node {rdzv.node_rank}: the run ended {outcome.status}: {envcapture.redact(outcome.reason)}"
                           f"\n" + "\n".join(envcapture.redact(line) for line in outcome.log_tail[-15:]))
    console.print(f"node {rdzv.node_rank} of {rdzv.nodes}: done ({outcome.wall_s:.1f} s)")
    return {"status": "ok", "follower": True, "node_rank": rdzv.node_rank}


@dataclass(frozen=True)
class _Profiled:
    """What the job reads of a profiled run's `results.profile`: the trace files it names (profile/store.py keeps them)."""

    files: list = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class _Resolved:
    """A later repeat's step count: its config's first ok run's (loop/step_counts.py)."""

    count: int | None = None


@dataclass(frozen=True)
class _Fields:
    """What the loop's fields of a record (`extra`) tell the job itself: a replayed adaptive run's step
    count, or the count a later repeat takes from its config's first run."""

    replay_steps: int | None = None
    steps_resolved: Mapping | None = None

    @classmethod
    def of(cls, base: dict) -> "_Fields":
        return typed(cls, base)

    @property
    def steps(self) -> int | None:
        return self.replay_steps or (typed(_Resolved, self.steps_resolved) or _Resolved()).count


@dataclass
class _Run:
    """One job's state between its stages."""

    config: Config
    host: JobHost
    job: int
    name: str
    ledger: Ledger
    chash: str
    env: dict[str, str]
    rdzv: cluster.Rendezvous
    base: dict
    scheduler: scheduler.Block = scheduler.Block()
    started: dict | None = None
    run_dir: Path | None = None
    env_hash: str | None = None
    outcome: launch.WorkerOutcome | None = None


def run_job(config: Config, host: JobHost, job: int, overrides: list[str], extra: dict | None = None, *, name: str,
            place: dict | None = None) -> dict:
    """Run one job to its recorded end; `extra` adds fields to its records (e.g. `replay_of`).
    `name`: the run's name, as the comparison will call it (the sweep's host makes it), shown
    while it runs and in every message about it. `place` runs the worker elsewhere: {"python": an
    interpreter, "src": repro's code} (a replay as recorded). Called by the sweep loop alone
    (loop/rounds.py `run_one`, for the sweep loop).

    Ledger first, in four stages: start (`started` record) → run (the worker) → finish (results
    spooled, `finished` record) → hand over (to MLflow's projector; never fatal).
    """
    rdzv = cluster.resolve(config.cluster)
    cluster.check_layout(config, rdzv.nodes, rdzv.jax_processes)
    cluster.check_reachable(rdzv)
    if not rdzv.leader:
        return run_follower(config, rdzv, name)
    run = _Run(config, host, job, name, Ledger(config.ledger.dir), config_hash(as_dict(config)),
               seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes)), rdzv, {})
    if done := resume.recorded_ok(config, run.chash, run.ledger, run.env, *resume.taken(host)):
        return _resumed(run, done, extra)
    run.base = _base(run, overrides, extra)
    held = _start(run)
    try:  # from here on, whatever happens (Ctrl-C, SIGTERM, no disk) ends in a "finished" record
        reserved = _run(run, held, place, view(run.base).calibration.gap or 0.0)
        interrupted = run.outcome.status == "interrupted"  # before _finish names a scheduler's end instead
        final, written, ended = _finish(run, reserved)
        if written:  # MLflow is a view of the ledger: a record only in the spool waits for recover + sync
            _hand_over(run, final, ended)
    finally:
        if run.run_dir:
            shutil.rmtree(run.run_dir, ignore_errors=True)
    # Ctrl-C or SIGTERM (SLURM's too): the sweep ends as interrupted, its record kept. So does a job SLURM
    # ended while its worker ran (its SIGTERM killed the worker; a submitit job process ignores it): no
    # later job of the allocation starts, to be killed after KillWait or measured while it is torn down.
    if interrupted or ended:
        raise KeyboardInterrupt
    return final


def _resumed(run: _Run, done: dict, extra: dict | None) -> dict:
    """`run.resume=true`: the job's result is already recorded ok on this environment. The sweep
    counts that record once (by id), as this job: in this sweep's view it carries this sweep and
    job (`sweep`), this job's `repeat`, and names the sweep it came from (`resumed_from`); the ledger
    keeps it as it was, and the sweep's record lists it (report/trajectory.py `store`)."""
    kept = view(done)
    resume.say_skipped(run.name, kept.id)
    repeat = {"repeat": extra["repeat"]} if extra and "repeat" in extra else {}  # the loop's own field, as given
    seen = {**done, "resumed_from": kept.sweep.id, "sweep": run.host.sweep_info(run.job), **repeat}
    run.host.finished(seen)
    _supersede_lost(run.ledger, done)
    return seen


def _base(run: _Run, overrides: list[str], extra: dict | None) -> dict:
    """What both of the job's records say (its `scheduler` block kept typed in `run`)."""
    run.scheduler = scheduler.Block.here()
    return {
        "kind": "run",
        "config_hash": run.chash,
        "config": as_dict(run.config),
        "overrides": overrides,
        "sweep": run.host.sweep_info(run.job),
        "git": run.host.git,
        "code": run.host.code,
        **workload_source.block(run.config.model),  # a model outside repro: its package, version, sha256, git
        "cluster": run.rdzv.as_dict(),
        "scheduler": run.scheduler.as_dict(),  # provenance, outside `config` and its hash
        **(extra or {}),
        "repro_version": __version__,
    }


def _start(run: _Run) -> lifeline.HeldInterrupts:
    """The `started` record. A Ctrl-C while it is written is held (else the record would have no
    end): `_run` releases it, inside the stage whose every end is recorded."""
    held = lifeline.HeldInterrupts()
    try:
        run.started = run.ledger.append({**run.base, "status": "started", "parent": lifeline.identity()})
    except BaseException:
        held.release()
        raise
    return held


def beside_start(host: JobHost, config: Config) -> None:
    """The parent's work while a worker starts, imports and builds, all before its measured steps
    (the gate waits for it): the next job's worker started first, so that its imports run while a
    projector still at work is waited for (none of it is measured), MLflow's side of the run, and
    that worker made ready (job/warm.py)."""
    host.warm.start_next()
    host.prepare_tracking(config)
    host.warm.settle()


def _run(run: _Run, held: lifeline.HeldInterrupts, place: dict | None, gap: float) -> Path | None:
    """The worker, from start to its outcome (`run.outcome`, whatever happened); the spool slot
    reserved for its results."""
    config, host, reserved = run.config, run.host, None
    try:
        held.release()  # raises the KeyboardInterrupt that came while `started` was written, if one did
        if snapshot.ensure_active():  # the code its record names, rebuilt if a cleanup took it (else: fails naming it)
            host.warm.discard()
        reserved = spool.reserve(run.ledger.root, view(run.started).id, config.run.steps)
        place = place or envs_runs.pinned(config, log=terminal().print)  # env.packages: its own venv
        where = launch.Place.of(place)
        python = where.interpreter(config)
        run.env_hash = envs_runs.record_hash(run.ledger.root, python, host.say)
        warm = host.warm.take(python, run.env, where.src, config.framework.backend,  # started while the last job started
                              config.run.start == "fork")
        run.run_dir = warm.run_dir if warm else launch.make_run_dir()
        host.display.job_started(run.job, run.name, config.run.steps)
        restore_sigterm = scheduler.interrupt_on_sigterm(run.scheduler)  # SLURM's end, recorded while it waits

        def on_event(ev: dict) -> None:
            host.display.event(run.job, ev)
            if ev["event"] == "measure_start":
                restore_sigterm()

        run.outcome = _run_worker(config, run.chash, run.rdzv, run.run_dir, run.env, on_event, place,
                                  lambda: beside_start(host, config), warm, gap,  # while the worker starts
                                  # a replayed adaptive run: the count it took; a later repeat: its config's first
                                  _Fields.of(run.base).steps, sweep_id=view(run.base).sweep.id)
    except KeyboardInterrupt:
        run.outcome = launch.WorkerOutcome("interrupted", None, reason="interrupted (Ctrl-C or SIGTERM) before the worker ran")
    except OSError as e:
        run.outcome = launch.WorkerOutcome("failed", None, reason=f"could not prepare the run: {e}")
    except EnvError as e:
        run.outcome = launch.WorkerOutcome("failed", None, reason=f"could not build the run's environment: {e}")
    except Exception as e:  # noqa: BLE001 - e.g. a worker killed halfway through its result line
        run.outcome = launch.WorkerOutcome("failed", None, reason=f"the run ended in {type(e).__name__}: {e}")
        if lifeline.interrupt_came():  # the interrupt, wrapped by Python on its way here (lifeline.interrupt)
            run.outcome = launch.WorkerOutcome("interrupted", None, reason=f"interrupted (Ctrl-C or SIGTERM): {run.outcome.reason}")
    return reserved


def _finish(run: _Run, reserved: Path | None) -> tuple[dict, bool, tuple | None]:
    """The `finished` record, spooled then in the ledger; a second Ctrl-C (or SLURM's SIGTERM)
    waits until it is kept. Returns the record, whether the ledger holds it, and how the
    scheduler ended the job (or None)."""
    outcome, host, ended = run.outcome, run.host, None
    interrupted = outcome.status == "interrupted"
    _keep_profiles(run.ledger, outcome)
    held = lifeline.HeldInterrupts()
    try:
        if outcome.status != "ok" and (ended := scheduler.ended_by_scheduler(run.scheduler)):
            # SLURM ended the job (scancel, time limit, requeue): its SIGTERM killed the worker or us
            # (the interrupt it raised here was SLURM's SIGTERM, not a Ctrl-C: only the worker's end is kept)
            outcome.status, outcome.reason = ended[0], ended[1] + ("" if interrupted else f"; {outcome.reason}")
        ends = Finished.of(view(run.started).id, outcome, run.config.tracking)
        if ends.environment is not None and run.env_hash:  # the whole environment, kept once in <ledger>/envs/
            ends = dataclasses.replace(ends, environment={**ends.environment, "env_hash": run.env_hash})
        if host.beside:  # its measured steps ran beside an MLflow projector (waited for, in vain)
            ends = dataclasses.replace(ends, machine={**(ends.machine or {}), "beside_projector": host.beside})
        record = {**run.base, **ends.as_dict()}
        if judged := canary.judge(record, run.ledger.root, run.config.verdict.canary_margin, host.say):  # before it is written
            record = {**record, "canary": judged}
        final, written = _append_finished(run.ledger, reserved, record, host, run.name)
    finally:
        if interrupted:
            held.came.clear()  # the interrupt this run ends with is already being acted on
        held.release()  # raises a Ctrl-C that came meanwhile, now that the record is kept
    host.display.job_finished(run.job, final, in_ledger=written)
    host.finished(final)
    if written and view(final).status == "ok" and run.config.run.resume:
        _supersede_lost(run.ledger, final)
    return final, written, ended


def _hand_over(run: _Run, final: dict, ended: tuple | None) -> None:
    """The finished record to MLflow's projector; a job SLURM ended is handed over, not drained
    (SLURM kills what is left after KillWait: `repro sync` finishes it)."""
    result = run.outcome.typed_events.result
    run.host.project(final, result.ir_files if result else [],
                     run.run_dir / "worker.log" if run.run_dir else None, drain=not ended)


def _supersede_lost(ledger: Ledger, ok: dict) -> None:
    """`run.resume=true`: a lost run of this config, now recorded ok, is marked superseded by it."""
    try:
        for r in ledger.supersede_lost(ok):
            terminal().print(f"resume: the lost run {r['prev']} is superseded by run {view(ok).id}")
    except LedgerError as e:  # the run itself is recorded; `repro ledger recover` marks it later
        terminal().print(f"resume: could not mark lost runs superseded ({e}); `repro ledger recover` does it")


def _keep_profiles(ledger: Ledger, outcome: launch.WorkerOutcome) -> None:
    """run.profile's trace files into the ledger's store, before the record that names them."""
    result = outcome.typed_events.result
    files = result.profile_files if result else []
    if files:
        from repro.profile import store

        try:
            store.keep(ledger.root, files, typed(_Profiled, result.results.get("profile")).files)
        except OSError as e:  # the record is worth more than its trace: say so, keep going
            terminal().print(f"[yellow]warning:[/] the profile trace could not be kept in {ledger.root}: {e}")


def _append_finished(ledger: Ledger, reserved: Path | None, record: dict, host: JobHost, name: str) -> tuple[dict, bool]:
    """The `finished` record, spooled first; a failed ledger write is retried, then its spool named.
    Returns the record and whether the ledger holds it."""
    # Set here, not by append, so that the spool holds them too: the recovered record gets the same id.
    record = {**record, "created": now_iso(), "schema_version": SCHEMA_VERSION}
    status = view(record).status
    spooled, error = None, None
    try:
        spooled = spool.write(reserved, record) if reserved else None
    except OSError as e:
        error = e
    for attempt in range(LEDGER_RETRIES):
        try:
            final = ledger.append(record)
        except (OSError, LedgerError) as e:  # LedgerError: the ledger's one-line form of an OSError
            error = e
            time.sleep(LEDGER_RETRY_S * (attempt + 1))
            continue
        if spooled:
            spool.discard(spooled)
        elif reserved:
            spool.discard(reserved)
        return final, True
    if spooled:
        host.failed(f"the {status} record of {name} could not be written to the "
                    f"ledger ({error}); its results are kept in {spooled}: free space, then run "
                    f"`repro ledger recover --ledger {ledger.root}`")
    else:  # neither the spool nor the ledger took it: the terminal is the last place left
        host.failed(f"the {status} record of {name} could not be written to the "
                       f"ledger nor spooled ({error}); here it is:\n{json.dumps(record, default=str)}")
    return {**record, "id": record_id(record)}, False


@dataclass(frozen=True)
class Finished:
    """What a `finished` record adds to the job's header (`_base`): how the worker ended, where its wall
    went, what it ran in and measured, and why it failed; each block from the worker's events, typed
    once (worker/events.py). A block the run never reached is left out of the record."""

    status: str
    prev: str  # the `started` record's id
    mlflow: dict
    wall_s: float
    wall_split: dict | None = None
    environment: Mapping | None = None
    seeds: Mapping | None = None
    data: Mapping | None = None
    results: dict | None = None
    effective: Mapping | None = None
    machine: Mapping | None = None
    canary: Mapping | None = None
    error: dict | None = None

    @classmethod
    def of(cls, started_id: str, outcome: launch.WorkerOutcome, tracking) -> "Finished":
        ev = outcome.typed_events
        env, result = ev.environment, ev.result
        blocks = {}
        if env is not None:
            blocks.update(environment=env.environment, seeds=env.seeds, data=env.data)
        if result is not None:
            blocks.update(results={**result.results, "loss": result.series.loss,
                                   "step_time_s": result.series.step_time_s},
                          effective=result.effective, machine=result.machine, canary=result.canary)
        if outcome.status != "ok":
            blocks.update(error={
                "reason": envcapture.redact(outcome.reason),
                "returncode": outcome.returncode,
                "traceback": ev.error.traceback if ev.error else [],
                "requested_bytes": ev.error.requested_bytes if ev.error else None,
                "log_tail": [envcapture.redact(line) for line in outcome.log_tail],
            })
        return cls(outcome.status, started_id, {"tracking_uri": tracking.uri, "experiment": tracking.experiment},
                   outcome.wall_s, wall_split.split(ev, outcome.started_at, outcome.wall_s), **blocks)

    def as_dict(self) -> dict:
        """The record's keys, in the order they are written (the ledger sorts them on disk)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: v for k, v in out.items() if v is not None or k in _ALWAYS}


_ALWAYS = frozenset({"status", "prev", "mlflow", "wall_s"})

