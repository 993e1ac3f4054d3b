"""One job, parent side: ledger "started" → MLflow child run → worker → results recorded.

On a node other than node 0 of a multi-node run, the job only runs its worker (whose
processes join node 0's rendezvous): node 0 records the run, once.

Whatever the worker does (finishes, fails, runs out of memory, is killed), and whatever
the parent meets (Ctrl-C or SIGTERM, a full disk), the job ends with a "finished" ledger
record naming the "started" one, written before MLflow is told (tracking/project.py): a
tracking store that is down costs a warning, and `repro sync` fills it in later.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from repro import __version__
from repro.console import console as terminal
from repro.backends.layouts import process_count
from repro.config import config_hash
from repro.config.schema import Config, as_dict
from repro.config.workerspec import WorkerSpec
from repro.ledger import Ledger, LedgerError
from repro.ledger.schema import SCHEMA_VERSION
from repro.ledger.store import now_iso, record_id
from repro.envs import runs as envs_runs
from repro.envs.venvs import EnvError
from repro.envs import workload_source
from repro.runner import cluster, envcapture, launch, lifeline, resume, scheduler, seeding, spool, wall_split

CACHE_ROOT = Path.home() / ".cache" / "repro" / "compile"
LEDGER_RETRIES, LEDGER_RETRY_S = 3, 0.5


RUN_DIR_PREFIX = "repro-run-"  # + the owner's pid + "-": a parent killed by SIGKILL cannot remove its own


def make_run_dir() -> Path:
    """A fresh temp folder for one run, named after this process; stale ones (their owner gone)
    are removed first."""
    for stale in Path(tempfile.gettempdir()).glob(f"{RUN_DIR_PREFIX}*"):
        if _owner_gone(stale):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-"))


def _owner_gone(folder: Path) -> bool:
    """Whether the process named in a run folder's name is gone (or is a later one with its pid)."""
    try:
        pid = int(folder.name[len(RUN_DIR_PREFIX):].split("-")[0])
        made = folder.stat().st_mtime
    except (ValueError, OSError):
        return False  # not one of ours (an older name without a pid), or gone already
    try:
        return psutil.Process(pid).create_time() > made + 1  # a pid reused since
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def _cache_dir(config: Config, run_dir: Path) -> str:
    if config.run.compile_cache == "warm":
        path = CACHE_ROOT / config.framework.backend
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    return str(run_dir / "compile-cache")


def _run_worker(config: Config, chash: str, rdzv: cluster.Rendezvous, run_dir: Path, env: dict[str, str],
                on_event, place: dict | None = None, beside_start=None, warm=None) -> launch.WorkerOutcome:
    spec_path = WorkerSpec(config, chash, str(run_dir), _cache_dir(config, run_dir), rdzv).write(run_dir / "spec.json")
    place = place or {}
    return launch.run_worker(spec_path, run_dir / "worker.log", place.get("python") or config.framework.python,
                             env, config.run.timeout_s, on_event, place.get("src"), beside_start, warm)


def run_follower(config: Config, rdzv: cluster.Rendezvous, name: str) -> dict:
    """A node other than node 0: its processes join the run; node 0 alone records it."""
    console = terminal()
    console.print(f"node {rdzv.node_rank} of {rdzv.nodes}: {name} joins the run at {rdzv.endpoint}; "
                  "node 0 records it")
    run_dir = make_run_dir()
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


def run_job(config: Config, session, job: int, overrides: list[str], extra: dict | None = None, *, name: str,
            place: dict | None = None) -> dict:
    """Run one job to its recorded end; `extra` adds fields to its records (e.g. `replay_of`).
    `name`: the run's name, as the comparison will call it (the caller's session makes it:
    `Session.run_name`), shown while it runs and in every message about it. `place` runs the
    worker elsewhere: {"python": an interpreter, "src": repro's code} (a replay as recorded).

    Ledger first: `started` → worker → results spooled → `finished` → MLflow (never fatal).
    """
    rdzv = cluster.resolve(config.cluster)
    cluster.check_layout(config, rdzv.nodes, rdzv.jax_processes)
    cluster.check_reachable(rdzv)
    if not rdzv.leader:
        return run_follower(config, rdzv, name)
    ledger = Ledger(config.ledger.dir)
    chash = config_hash(as_dict(config))
    env = seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes))
    if done := resume.recorded_ok(config, chash, ledger, env):
        terminal().print(f"resume: {name} skipped, already recorded ok on this environment "
                               f"(ledger {done['id']})")
        session.finished(done)
        _supersede_lost(ledger, done)
        return done
    base = {
        "kind": "run",
        "config_hash": chash,
        "config": as_dict(config),
        "overrides": overrides,
        "sweep": session.sweep_info(job),
        "git": session.git,
        "code": session.code,
        **workload_source.block(config.model),  # a model outside repro: its package, version, sha256, git
        "cluster": rdzv.as_dict(),
        "scheduler": scheduler.block(),  # provenance, outside `config` and its hash
        **(extra or {}),
        "repro_version": __version__,
    }
    held = lifeline.HeldInterrupts()  # a Ctrl-C while `started` is written would leave it without an end
    try:
        started = ledger.append({**base, "status": "started", "parent": lifeline.identity()})
    except BaseException:
        held.release()
        raise
    run_dir, reserved, env_hash = None, None, None
    try:  # from here on, whatever happens (Ctrl-C, SIGTERM, no disk) ends in a "finished" record
        held.release()  # raises the KeyboardInterrupt that came meanwhile, if one did
        reserved = spool.reserve(ledger.root, started["id"], config.run.steps)
        place = place or envs_runs.pinned(config, log=terminal().print)  # env.packages: its own venv
        python = (place or {}).get("python") or config.framework.python
        env_hash = envs_runs.record_hash(ledger.root, python)
        warm = session.warm.take(python, env, (place or {}).get("src"), config.framework.backend)  # started while the last job ended
        run_dir = warm.run_dir if warm else make_run_dir()
        session.display.job_started(job, name, config.run.steps)

        def on_event(ev: dict) -> None:
            session.display.event(job, ev)
            if ev["event"] == "measure_end" and not config.run.profile:  # profiled steps come after it
                session.warm.start_next()

        outcome = _run_worker(config, chash, rdzv, run_dir, env, on_event, place,
                              lambda: session.prepare_tracking(config), warm)  # while the worker starts
    except KeyboardInterrupt:
        outcome = launch.WorkerOutcome("interrupted", None, reason="interrupted (Ctrl-C or SIGTERM) before the worker ran")
    except OSError as e:
        outcome = launch.WorkerOutcome("failed", None, reason=f"could not prepare the run: {e}")
    except EnvError as e:
        outcome = launch.WorkerOutcome("failed", None, reason=f"could not build the run's environment: {e}")
    except Exception as e:  # noqa: BLE001 - e.g. a worker killed halfway through its result line
        outcome = launch.WorkerOutcome("failed", None, reason=f"the run ended in {type(e).__name__}: {e}")
        if lifeline.interrupt_came():  # the interrupt, wrapped by Python on its way here (lifeline.interrupt)
            outcome = launch.WorkerOutcome("interrupted", None, reason=f"interrupted (Ctrl-C or SIGTERM): {outcome.reason}")
    interrupted, ended = outcome.status == "interrupted", None
    try:
        _keep_profiles(ledger, outcome)
        held = lifeline.HeldInterrupts()  # a second Ctrl-C (or SLURM's SIGTERM) must not cut the record
        try:
            if outcome.status != "ok" and (ended := scheduler.ended_by_scheduler(base["scheduler"])):
                # SLURM ended the job (scancel, time limit, requeue): its SIGTERM killed the worker or us
                # (the interrupt it raised here was SLURM's SIGTERM, not a Ctrl-C: only the worker's end is kept)
                outcome.status, outcome.reason = ended[0], ended[1] + ("" if interrupted else f"; {outcome.reason}")
            record = _finished_record(base, started, outcome, config.tracking)
            if "environment" in record and env_hash:  # the whole environment, kept once in <ledger>/envs/
                record["environment"]["env_hash"] = env_hash
            if session.beside:  # its measured steps ran beside an MLflow projector (waited for, in vain)
                record.setdefault("machine", {})["beside_projector"] = session.beside
            final, written = _append_finished(ledger, reserved, record, session, name)
        finally:
            if interrupted:
                held.came.clear()  # the interrupt this run ends with is already being acted on
            held.release()  # raises a Ctrl-C that came meanwhile, now that the record is kept
        session.display.job_finished(job, final, in_ledger=written)
        session.finished(final)
        if written and final["status"] == "ok" and config.run.resume:
            _supersede_lost(ledger, final)
        if written:  # MLflow is a view of the ledger: a record only in the spool waits for recover + sync
            # SLURM kills what is left after KillWait: handed over, not drained (`repro sync` finishes it)
            session.project(final, outcome.events.get("result", {}).get("ir_files", []),
                            run_dir / "worker.log" if run_dir else None, drain=not ended)
    finally:
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    if interrupted:
        raise KeyboardInterrupt
    return final


def _supersede_lost(ledger: Ledger, ok: dict) -> None:
    """`run.resume=true`: a lost run of this config, now recorded ok, is marked superseded by it."""
    try:
        for r in ledger.supersede_lost(ok):
            terminal().print(f"resume: the lost run {r['prev']} is superseded by run {ok['id']}")
    except LedgerError as e:  # the run itself is recorded; `repro ledger recover` marks it later
        terminal().print(f"resume: could not mark lost runs superseded ({e}); `repro ledger recover` does it")


def _keep_profiles(ledger: Ledger, outcome: launch.WorkerOutcome) -> None:
    """run.profile's trace files into the ledger's store, before the record that names them."""
    result = outcome.events.get("result") or {}
    files = result.get("profile_files") or []
    if files:
        from repro.profile import store

        try:
            store.keep(ledger.root, files, result["results"]["profile"]["files"])
        except OSError as e:  # the record is worth more than its trace: say so, keep going
            terminal().print(f"[yellow]warning:[/] the profile trace could not be kept in {ledger.root}: {e}")


def _append_finished(ledger: Ledger, reserved: Path | None, record: dict, session, name: str) -> tuple[dict, bool]:
    """The `finished` record, spooled first; a failed ledger write is retried, then its spool named.
    Returns the record and whether the ledger holds it."""
    # Set here, not by append, so that the spool holds them too: the recovered record gets the same id.
    record["created"] = now_iso()
    record["schema_version"] = SCHEMA_VERSION
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
        session.failed(f"the {record['status']} record of {name} could not be written to the "
                       f"ledger ({error}); its results are kept in {spooled}: free space, then run "
                       f"`repro ledger recover --ledger {ledger.root}`")
    else:  # neither the spool nor the ledger took it: the terminal is the last place left
        session.failed(f"the {record['status']} record of {name} could not be written to the "
                       f"ledger nor spooled ({error}); here it is:\n{json.dumps(record, default=str)}")
    return {**record, "id": record_id(record)}, False


def _finished_record(base: dict, started: dict, outcome: launch.WorkerOutcome, tracking) -> dict:
    ev = outcome.events
    record = {**base, "status": outcome.status, "prev": started["id"],
              "mlflow": {"tracking_uri": tracking.uri, "experiment": tracking.experiment},
              "wall_s": outcome.wall_s}
    if wall := wall_split.split(ev, outcome.started_at, outcome.wall_s):  # where the wall went
        record["wall_split"] = wall
    if "environment" in ev:
        record["environment"] = ev["environment"]["environment"]
        record["seeds"] = ev["environment"]["seeds"]
        record["data"] = ev["environment"]["data"]
    if "result" in ev:
        result = ev["result"]
        record["results"] = result["results"]
        record["results"]["loss"] = result["series"]["loss"]
        record["results"]["step_time_s"] = result["series"]["step_time_s"]
        record["effective"] = result["effective"]
        if "machine" in result:
            record["machine"] = result["machine"]
    if outcome.status != "ok":
        record["error"] = {
            "reason": envcapture.redact(outcome.reason),
            "returncode": outcome.returncode,
            "traceback": ev.get("error", {}).get("traceback", []),
            "requested_bytes": ev.get("error", {}).get("requested_bytes"),
            "log_tail": [envcapture.redact(line) for line in outcome.log_tail],
        }
    return record
