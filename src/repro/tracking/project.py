"""A ledger record into MLflow: the one way a run reaches the tracking store.

The live path (after the `finished` record is written) and `repro sync` (for runs whose
store was down) both call `project_run`, so a synced run looks exactly like a live one.
It needs only the ledger record, plus the files the worker left (IR) where still at hand.
A run is complete in MLflow once it carries `repro.projected=complete`; one interrupted
halfway lacks it, and `repro sync` replaces it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import yaml

from repro.ledger.command import command
from repro.redaction import redact
from repro.worker.lifeline import HeldInterrupts
from repro.ledger.record import Git, Sweep, view
from repro.tracking import content, handoff
from repro.flat import flatten

COMPLETE_TAG = "repro.projected"
RECORD_TAGS = ("replay_of", "repeat")  # record fields that tag the run, where present


def tags(record: dict) -> dict[str, str]:
    rec = view(record)
    config, git = rec.config, rec.git
    out = {"repro.config_hash": rec.config_hash, "repro.ledger_id": rec.id,
           "repro.status": rec.status, "repro.framework": config.framework.name,
           "repro.model": config.model.name, "repro.sweep_id": rec.sweep.id or "",
           "git.commit": str(git.commit), "git.dirty": str(git.dirty)}
    out.update({f"repro.{k}": str(v) for k, v in flatten({k: record[k] for k in RECORD_TAGS if k in record}).items()})  # repeat.index, repeat.group
    if rec.environment.raw:
        out["repro.env_fingerprint"] = rec.environment.fingerprint
    if rec.data.raw:
        out["repro.data_sha256"] = rec.data.sha256
    out.update({f"machine.{k}": str(v) for k, v in flatten(rec.machine.raw).items() if v not in ([], None)})
    return out


def project_run(tracker, record: dict, name: str, parent_run_id: str | None = None, files: list[str] = (),
                worker_log: Path | None = None) -> str:
    """Create the MLflow run of a ledger record under `name` (its run name, as the terminal and
    the report call it), log all of it (what: tracking/content.py) and end it; returns its run
    id. `worker_log`: the worker's log, where still at hand."""
    run_tags = {**tags(record), **content.source_tags(view(record).git, command(record, places=False)),
                **content.run_tags(record)}
    start, end = content.run_window(record)
    run_id = tracker.start_run(name, parent_id=parent_run_id, tags=run_tags, start_time=start)
    try:
        tracker.log(run_id, params=content.params(record), metrics=content.metrics(record),
                    series=content.series(record))
        tracker.log_datasets(run_id, content.datasets(record))
        if worker_log and os.path.lexists(worker_log):  # a regular file only: a link is never followed
            tracker.log_text(run_id, "worker.log", redact(handoff.read_text(Path(worker_log), handoff.FILE_LIMIT)))
        tracker.log_text(run_id, "config.yaml", yaml.safe_dump(record["config"], sort_keys=False))
        tracker.log_json(run_id, "ledger_record.json", record)
        if (env := view(record).environment).raw:
            tracker.log_json(run_id, "environment.json", env.raw)
        if files:
            tracker.log_files(run_id, files, folder="ir")
        if traces := _profile_files(record):
            tracker.log_files(run_id, traces, folder="profile")
        tracker.log(run_id, tags={COMPLETE_TAG: "complete"})
    except KeyboardInterrupt:  # Ctrl-C halfway: closed (a second Ctrl-C waits), left for `repro sync` to replace
        held = HeldInterrupts()
        try:
            tracker.end(run_id, "interrupted", retry=False)  # once: the user is waiting for the process to end
        except Exception:  # noqa: BLE001 - the interrupted write may still hold a sqlite store's lock in
            pass  # this process (MLflow rolls back on Exception only): the run stays incomplete, `repro sync` replaces it
        finally:
            held.came.clear()
            held.release()
        raise
    tracker.end(run_id, view(record).status, end_time=end)
    return run_id


def _profile_files(record: dict) -> list[str]:
    """run.profile's trace files, from the ledger's store (repro.profile.store)."""
    if not view(record).results.profile:
        return []
    from repro.profile import store

    return [str(p) for p in store.paths(record)]


def sweep_parent(tracker, sweep: Sweep, git: Git, owner: dict | None = None) -> str:
    """The MLflow parent run of a sweep (a record's typed `sweep` and `git`): found by its sweep id,
    else created. `owner`: the sweep's process (lifeline.identity()), so that `repro sync` closes it
    only once it is gone."""
    for run in tracker.find_runs("repro.sweep_id", sweep.id):
        if "mlflow.parentRunId" not in run.data.tags:
            return run.info.run_id
    return tracker.start_run(f"{tracker.experiment} sweep {sweep.id}", tags={
        "repro.sweep_id": sweep.id, "repro.jobs": str(sweep.jobs),
        "git.commit": str(git.commit), "git.dirty": str(git.dirty),
        **{f"repro.sweep_{k}": str(v) for k, v in (owner or {}).items()}})


def attach_report(tracker, run_id: str, comparison, params: dict[str, str], command_line: str, git: Git,
                  out: Path) -> None:
    """A sweep's report on its MLflow parent run: the folder's files as artifacts, the comparison
    (report/comparison.py) as the run's description, what was swept as params."""
    tracker.log(run_id, params=params, tags={"mlflow.note.content": content.sweep_description(comparison),
                                             **content.source_tags(git, command_line)})
    tracker.log_folder(run_id, out)


def close_parent(tracker, run_id: str, records: list[dict], status: str) -> None:
    tracker.log(run_id, metrics={"jobs_ok": sum(view(r).status == "ok" for r in records),
                                 "jobs_recorded": len(records)})
    tracker.end(run_id, status)


def project_bisect(tracker, record: dict, report_dir: Path | None = None) -> str:
    """A bisection's ledger record (kind "bisect", repro bisect) as one MLflow parent run with a child per
    probe (the confirmation first): the parent found by the bisection's key (a later record of it
    updates the same parent and adds the probes it lacks), its result as tags and metrics, its report
    folder as artifacts. A function of the record alone: `repro sync` rebuilds it from the ledger."""
    rec = view(record)
    b = rec.bisect
    key, culprit = b.key, b.culprit
    tags = {"repro.bisect_key": key, "repro.bisect_id": rec.id, "repro.bisect_status": rec.status,
            "repro.bisect_good": b.good, "repro.bisect_bad": b.bad,
            **({"repro.bisect_culprit": culprit.label} if culprit else {})}
    parents = [r for r in tracker.find_runs("repro.bisect_key", key) if "repro.bisect_probe" not in r.data.tags]
    parent = parents[0].info.run_id if parents else \
        tracker.start_run(f"bisect {b.good[:8]}..{b.bad[:8]}", tags=tags)
    metrics = {"positions": b.n + 1, "probes": len(b.probes), "runs": len(rec.runs), "spent_s": b.spent_s}
    if culprit:
        metrics.update(culprit_position=culprit.position, posterior=b.result["posterior"], ratio=culprit.ratio,
                       ratio_lo=culprit.lo, ratio_hi=culprit.hi)
    tracker.log(parent, tags=tags, metrics=metrics)
    have = {r.data.tags["repro.bisect_probe"] for r in tracker.find_runs("repro.bisect_key", key)
            if "repro.bisect_probe" in r.data.tags}
    probes = ([("confirm", dataclasses.replace(b.confirmation, position=b.n, label="BAD against GOOD"))]
              if b.confirmation else []) + [(str(i + 1), p) for i, p in enumerate(b.probes)]
    for number, p in probes:
        if number in have:
            continue
        child = tracker.start_run(f"probe {number}: position {p.position}", parent_id=parent, tags={
            "repro.bisect_key": key, "repro.bisect_probe": number, "repro.bisect_outcome": p.outcome,
            "repro.bisect_label": p.label, "repro.bisect_runs": ",".join(p.runs)})
        tracker.log(child, metrics={"position": p.position, "ratio": p.ratio, "ratio_lo": p.lo,
                                    "ratio_hi": p.hi, "rounds": p.rounds, "runs": len(p.runs)})
        tracker.end(child, "ok")
    tracker.log_json(parent, "bisect_record.json", record)
    if report_dir is not None and Path(report_dir).is_dir():
        tracker.log_folder(parent, report_dir)
    if rec.status != "running":
        tracker.end(parent, {"failed": "failed", "interrupted": "interrupted"}.get(rec.status, "ok"))
    return parent
