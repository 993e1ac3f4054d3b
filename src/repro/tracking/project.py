"""A ledger record into MLflow: the one way a run reaches the tracking store.

The live path (after the `finished` record is written) and `repro sync` (for runs whose
store was down) both call `project_run`, so a synced run looks exactly like a live one.
It needs only the ledger record, plus the files the worker left (IR) where still at hand.
A run is complete in MLflow once it carries `repro.projected=complete`; one interrupted
halfway lacks it, and `repro sync` replaces it.
"""

from __future__ import annotations

import yaml

from repro.runner.job import label
from repro.runner.lifeline import HeldInterrupts
from repro.tracking.flat import flatten

COMPLETE_TAG = "repro.projected"
RECORD_TAGS = ("replay_of", "repeat")  # record fields that tag the run, where present
NOT_METRICS = ("loss_sha256", "params_sha256", "ir_ops")


def tags(record: dict) -> dict[str, str]:
    config, git = record["config"], record.get("git") or {}
    out = {"repro.config_hash": record["config_hash"], "repro.ledger_id": record["id"],
           "repro.status": record["status"], "repro.framework": config["framework"]["name"],
           "repro.model": config["model"]["name"], "repro.sweep_id": (record.get("sweep") or {}).get("id", ""),
           "git.commit": str(git.get("commit")), "git.dirty": str(git.get("dirty"))}
    out.update({f"repro.{k}": str(v) for k, v in flatten({k: record[k] for k in RECORD_TAGS if k in record}).items()})  # repeat.index, repeat.group
    if record.get("environment"):
        out["repro.env_fingerprint"] = record["environment"]["fingerprint"]
    if record.get("data"):
        out["repro.data_sha256"] = record["data"]["sha256"]
    out.update({f"machine.{k}": str(v) for k, v in flatten(record.get("machine") or {}).items() if v not in ([], None)})
    return out


def params(record: dict) -> dict:
    effective = {f"effective.{k}": v for k, v in flatten(record.get("effective") or {}).items()}
    return {**flatten(record["config"]), **effective}


def metrics(record: dict) -> dict[str, float]:
    results = record.get("results") or {}
    flat = flatten({k: v for k, v in results.items() if k not in NOT_METRICS})
    return {k.replace(".", "/"): v for k, v in flat.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def series(record: dict) -> dict[str, list[float]]:
    results = record.get("results") or {}
    return {k: results[k] for k in ("loss", "step_time_s") if results.get(k)}


def project_run(tracker, record: dict, parent_run_id: str | None = None, files: list[str] = ()) -> str:
    """Create the MLflow run of a ledger record, log all of it and end it; returns its run id."""
    name = label(record["config"], record.get("overrides") or [], (record.get("sweep") or {}).get("swept"))
    run_id = tracker.start_run(name, parent_id=parent_run_id, tags=tags(record))
    try:
        tracker.log(run_id, params=params(record), metrics=metrics(record), series=series(record))
        tracker.log_text(run_id, "config.yaml", yaml.safe_dump(record["config"], sort_keys=False))
        tracker.log_json(run_id, "ledger_record.json", record)
        if record.get("environment"):
            tracker.log_json(run_id, "environment.json", record["environment"])
        if files:
            tracker.log_files(run_id, files, folder="ir")
        tracker.log(run_id, tags={COMPLETE_TAG: "complete"})
    except KeyboardInterrupt:  # Ctrl-C halfway: closed (a second Ctrl-C waits), left for `repro sync` to replace
        held = HeldInterrupts()
        try:
            tracker.end(run_id, "interrupted")
        finally:
            held.came.clear()
            held.release()
        raise
    tracker.end(run_id, record["status"])
    return run_id


def sweep_parent(tracker, sweep: dict, git: dict, owner: dict | None = None) -> str:
    """The MLflow parent run of a sweep: found by its sweep id, else created. `owner`: the
    sweep's process (lifeline.identity()), so that `repro sync` closes it only once it is gone."""
    for run in tracker.find_runs("repro.sweep_id", sweep["id"]):
        if "mlflow.parentRunId" not in run.data.tags:
            return run.info.run_id
    return tracker.start_run(f"{tracker.experiment} sweep {sweep['id']}", tags={
        "repro.sweep_id": sweep["id"], "repro.jobs": str(sweep.get("jobs")),
        "git.commit": str(git.get("commit")), "git.dirty": str(git.get("dirty")),
        **{f"repro.sweep_{k}": str(v) for k, v in (owner or {}).items()}})


def close_parent(tracker, run_id: str, records: list[dict], status: str) -> None:
    tracker.log(run_id, metrics={"jobs_ok": sum(r["status"] == "ok" for r in records),
                                 "jobs_recorded": len(records)})
    tracker.end(run_id, status)
