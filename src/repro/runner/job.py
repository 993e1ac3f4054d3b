"""One job, parent side: ledger "started" → MLflow child run → worker → results recorded.

On a node other than node 0 of a multi-node run, the job only runs its worker (whose
processes join node 0's rendezvous): node 0 records the run, once.

Whatever the worker does (finishes, fails, runs out of memory, is killed), the job ends with
a "finished" ledger record naming the "started" one and a terminated MLflow run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import yaml

from repro import __version__, report
from repro.backends.layouts import process_count
from repro.config import config_hash
from repro.ledger import Ledger
from repro.report import summary
from repro.runner import cluster, envcapture, launch, seeding
from repro.tracking import content

CACHE_ROOT = Path.home() / ".cache" / "repro" / "compile"


def label(config: dict) -> str:
    m = config["model"]
    return f"{config['framework']['name']} {m['name']}/{m['preset']} {config['precision']['name']}"


def _cache_dir(config: dict, run_dir: Path) -> str:
    if config["run"]["compile_cache"] == "warm":
        path = CACHE_ROOT / config["framework"]["backend"]
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    return str(run_dir / "compile-cache")


def _swept_keys(base: dict) -> list[str]:
    """The keys this command line sweeps (from its preflight plan), which name the MLflow runs."""
    from repro import sweep

    plan = [{"overrides": list(o)} for o in sweep.PLAN.overrides] if sweep.PLAN else []
    return summary.swept_keys(plan or [base])


def _run_worker(config: dict, chash: str, rdzv: cluster.Rendezvous, run_dir: Path, on_event) -> launch.WorkerOutcome:
    spec = {"config": config, "config_hash": chash, "out_dir": str(run_dir),
            "cache_dir": _cache_dir(config, run_dir), "rendezvous": rdzv.as_dict()}
    spec_path = run_dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    return launch.run_worker(spec_path, run_dir / "worker.log", config["framework"]["python"],
                             seeding.worker_env(config, process_count(config, rdzv.nodes, rdzv.jax_processes)),
                             config["run"]["timeout_s"], on_event)


def run_follower(config: dict, rdzv: cluster.Rendezvous) -> dict:
    """A node other than node 0: its processes join the run; node 0 alone records it."""
    console = report.console()
    console.print(f"node {rdzv.node_rank} of {rdzv.nodes}: {label(config)} joins the run at {rdzv.endpoint}; "
                  "node 0 records it")
    run_dir = Path(tempfile.mkdtemp(prefix="repro-run-"))
    try:
        outcome = _run_worker(config, config_hash(config), rdzv, run_dir, lambda ev: None)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if outcome.status != "ok":
        raise RuntimeError(f"node {rdzv.node_rank}: the run ended {outcome.status}: {envcapture.redact(outcome.reason)}"
                           f"\n" + "\n".join(envcapture.redact(line) for line in outcome.log_tail[-15:]))
    console.print(f"node {rdzv.node_rank} of {rdzv.nodes}: done ({outcome.wall_s:.1f} s)")
    return {"status": "ok", "follower": True, "node_rank": rdzv.node_rank}


def run_job(config: dict, session, job: int, overrides: list[str], extra: dict | None = None) -> dict:
    """Run one job to its recorded end; `extra` adds fields to its records (e.g. `replay_of`)."""
    rdzv = cluster.resolve(config.get("cluster"))
    cluster.check_layout(config, rdzv.nodes, rdzv.jax_processes)
    if not rdzv.leader:
        return run_follower(config, rdzv)
    ledger = Ledger(config["ledger"]["dir"])
    tracker = session.tracker_for(config)
    chash = config_hash(config)
    base = {
        "kind": "run",
        "config_hash": chash,
        "config": config,
        "overrides": overrides,
        "sweep": session.sweep_info(job),
        "git": session.git,
        "code": session.code,
        "cluster": rdzv.as_dict(),
        **(extra or {}),
        "repro_version": __version__,
    }
    started = ledger.append({**base, "status": "started"})
    name = content.run_name(base, _swept_keys(base))
    run_id = tracker.start_run(name, parent_id=session.parent_run_id(tracker), tags={
        "repro.config_hash": chash, "repro.ledger_id": started["id"], "repro.status": "started",
        "repro.framework": config["framework"]["name"], "repro.model": config["model"]["name"],
        "repro.sweep_id": session.sweep_id, "git.commit": str(session.git["commit"]),
        "git.dirty": str(session.git["dirty"]),
        **content.source_tags(session.git, summary.command(base, places=False)),
        **{f"repro.{k}": str(v) for k, v in (extra or {}).items()},
    })
    tracker.log(run_id, params=content.params(base))
    mlflow_ref = {"tracking_uri": tracker.uri, "experiment_id": tracker.experiment_id, "run_id": run_id}

    run_dir = Path(tempfile.mkdtemp(prefix="repro-run-"))
    try:
        session.display.job_started(job, label(config), config["run"]["steps"])
        outcome = _run_worker(config, chash, rdzv, run_dir, lambda ev: session.display.event(job, ev))
        record = _finished_record(base, started, outcome, mlflow_ref)
        final = ledger.append(record)
        _log_outcome(tracker, run_id, config, final, outcome, run_dir / "worker.log")
        session.display.job_finished(job, final)
        session.finished(final)
        if outcome.status == "interrupted":
            raise KeyboardInterrupt
        return final
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _finished_record(base: dict, started: dict, outcome: launch.WorkerOutcome, mlflow_ref: dict) -> dict:
    ev = outcome.events
    record = {**base, "status": outcome.status, "prev": started["id"], "mlflow": mlflow_ref,
              "wall_s": outcome.wall_s}
    if "environment" in ev:
        record["environment"] = ev["environment"]["environment"]
        record["seeds"] = ev["environment"]["seeds"]
        record["data"] = ev["environment"]["data"]
    if "result" in ev:
        record["results"] = ev["result"]["results"]
        record["results"]["loss"] = ev["result"]["series"]["loss"]
        record["results"]["step_time_s"] = ev["result"]["series"]["step_time_s"]
        record["effective"] = ev["result"]["effective"]
    if outcome.status != "ok":
        record["error"] = {
            "reason": envcapture.redact(outcome.reason),
            "returncode": outcome.returncode,
            "traceback": ev.get("error", {}).get("traceback", []),
            "requested_bytes": ev.get("error", {}).get("requested_bytes"),
            "log_tail": [envcapture.redact(line) for line in outcome.log_tail],
        }
    return record


def _log_outcome(tracker, run_id: str, config: dict, record: dict, outcome: launch.WorkerOutcome,
                 worker_log: Path) -> None:
    env = record.get("environment")
    effective = {k: v for k, v in content.params(record).items() if k.startswith("effective.")}
    tracker.log(run_id, tags=content.run_tags(record), params=effective, metrics=content.metrics(record),
                series=content.series(record))
    tracker.log_datasets(run_id, content.datasets(record))
    if worker_log.exists():
        tracker.log_text(run_id, "worker.log", envcapture.redact(worker_log.read_text(errors="replace")))
    tracker.log_text(run_id, "config.yaml", yaml.safe_dump(config, sort_keys=False))
    tracker.log_json(run_id, "ledger_record.json", record)
    if env:
        tracker.log_json(run_id, "environment.json", env)
    ir_files = outcome.events.get("result", {}).get("ir_files", [])
    if ir_files:
        tracker.log_files(run_id, ir_files, folder="ir")
    tracker.end(run_id, record["status"])
