"""The one code that writes MLflow: ledger records (and what was handed over with them) into a store.

MLflow is a view of the ledger (docs/architecture.md, "Ledger first"). Every run reaches it through
`project_runs`, whoever calls:
- `drain`: the pending entries sessions hand over (tracking/handoff.py), run by the detached
  projector after a local command, inline (bounded) at the end of a submitit/SLURM job, and
  first thing by `repro sync`;
- `sync_store`: `repro sync`'s catch-up of runs the ledger holds and MLflow lacks.
`open_store` is the only place a tracker is opened; a sweep's parent run is found or made by
`project.sweep_parent` (through `_parent`) and closed by `close_sweep` (a closed sweep's entry)
or `sync_store` (a sweep whose process is gone). A run already complete in MLflow is never
written twice (the `repro.ledger_id` tag).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from repro.ledger import Ledger
from repro.ledger.record import view
from repro.ledger.state import state_of
from repro.worker import lifeline
from repro.redaction import redact
from repro.tracking import failure_line, handoff


class ProjectionFailed(Exception):
    """Pending entries a store did not take; the message is the store's own error, one line."""


def open_store(uri: str, experiment: str):
    """A tracker on (uri, experiment): MLflow is imported here, and only here. A URI read back
    from the ledger is redacted: the client gets the real one where this process knows it."""
    from repro.redaction import restore
    from repro.tracking.mlflow_tracker import Tracker

    return Tracker(restore(uri), experiment)


@dataclass
class Item:
    """One run to put into MLflow: its record, and what was handed over with it (if anything)."""

    record: dict
    entry: Path | None = None  # its pending entry, removed once MLflow has the run
    ir: list[str] = field(default_factory=list)
    log: Path | None = None
    tags: dict = field(default_factory=dict)
    owner: dict | None = None  # the sweep's process (lifeline.identity()): sync closes its parent once it is gone


def _parent(tracker, item: Item, parents: dict) -> str | None:
    rec = view(item.record)
    sweep = rec.sweep
    if not sweep.multirun:
        return None
    if sweep.id not in parents:
        from repro.tracking.project import sweep_parent

        parents[sweep.id] = sweep_parent(tracker, sweep, rec.git, item.owner)
    return parents[sweep.id]


def project_runs(tracker, items: list[Item], parents: dict) -> dict[str, int]:
    """Each item's run into the store under its sweep's parent: a complete one is left as it is
    (only new tags are added), one cut short earlier is replaced whole; pending entries are
    removed once done. Counts: pushed, replaced, present. Each run is written in a quiet turn:
    between the measured windows of runs on this machine (handoff.quiet_turn)."""
    counts = {"pushed": 0, "replaced": 0, "present": 0}
    existing = {run.data.tags["repro.ledger_id"]: run for run in tracker.find_runs("repro.ledger_id")}
    for item in items:
        with handoff.quiet_turn():
            for key in _project_one(tracker, item, existing.get(view(item.record).id), parents):
                counts[key] += 1
    return counts


def _project_one(tracker, item: Item, run, parents: dict) -> tuple[str, ...]:
    """One item into the store (`run`: its MLflow run already there, or None); the counts it adds to
    (a run cut short and written again is both replaced and pushed)."""
    from repro.report.varied import run_name  # a run is named as the sweep that made it named it
    from repro.tracking.project import COMPLETE_TAG, project_run

    record, counted = item.record, None
    if run is not None and run.data.tags.get(COMPLETE_TAG) == "complete":
        counted, run_id = ("present",), run.info.run_id
    else:
        if run is not None:  # cut short (Ctrl-C, a store that failed halfway): replaced whole
            tracker.client.delete_run(run.info.run_id)
        run_id = project_run(tracker, record, run_name(record, list(view(record).sweep.swept)),
                             _parent(tracker, item, parents), item.ir, item.log)
        counted = ("pushed",) if run is None else ("pushed", "replaced")
    if item.tags:
        tracker.log(run_id, tags=item.tags)
    if item.entry is not None:
        handoff.done(item.entry)
    return counted


def close_sweep(tracker, ledger: Ledger, data: handoff.Pending, records: list[dict], parents: dict) -> None:
    """A closed sweep's parent run: its report, trajectory and end (the sweep entry's `status`)."""
    from repro.ledger.command import sweep_command
    from repro.report import comparison, sweep_report, trajectory
    from repro.tracking.project import attach_report, close_parent

    run_id = _parent(tracker, Item(records[0], owner=data.owner), parents)
    if data.trajectory:
        trajectory.log_parent(tracker, run_id, ledger.get(data.trajectory))
    if data.report_dir and Path(data.report_dir).is_dir():
        attach_report(tracker, run_id, comparison.build(records), sweep_report.swept_params(records),
                      sweep_command(records, places=False), view(records[0]).git, Path(data.report_dir))
    close_parent(tracker, run_id, records, data.status)


def write_reports(ledger: Ledger, pending: list[tuple[Path, handoff.Pending]]) -> None:
    """The report folders the sessions announced, before (and whatever becomes of) MLflow; a
    report that fails is said once in the log and left to `repro report --sweep ID`."""
    from repro.report import sweep_report
    from repro.report.compare import with_reused

    for entry, data in pending:
        if data.kind != "sweep" or not data.write_report:
            continue
        # a resumed sweep's report holds the earlier runs it took too; its MLflow parent only its own
        records = with_reused(ledger, data.id, _sweep_records(ledger, data.id))
        try:
            if records:
                with handoff.quiet_turn():  # matplotlib's figures: seconds of CPU
                    sweep_report.write(records, Path(data.report_dir))
        except Exception as e:  # noqa: BLE001 - the records are in the ledger: the report can be rebuilt
            print(f"repro projector: the report of sweep {data.id} was not completed ({type(e).__name__}: {e}); "
                  f"`repro report --sweep {data.id}` rebuilds it from the ledger", file=sys.stderr)
        # written back as it was read (keys this reader does not know kept), its report now done
        handoff.add_sweep(ledger.root, data.id, {**{k: v for k, v in data.raw.items() if k not in ("kind", "id")},
                                                 "write_report": False})


def _sweep_records(ledger: Ledger, sweep_id: str) -> list[dict]:
    return sorted(ledger.heads(kind="run", sweep=sweep_id), key=lambda r: view(r).sweep.job)


def store_of(record: dict) -> tuple[str, str]:
    """The MLflow store and experiment a run record names (its config's `tracking`)."""
    tracking = view(record).config.tracking
    return tracking.uri, tracking.experiment


def drain(ledger_root: str | Path, say: bool = True, ledger: Ledger | None = None) -> dict[str, int]:
    """Open the sqlite stores, write the announced reports, open the other stores, then project every
    pending entry; the caller holds `handoff.lock`. Per store, a failure stops that store's entries
    (left for later) and is recorded (and said, with `say`); the others go on. A new sqlite store is
    made first: the command that handed it over has returned, and until it is made a client that opens
    it (the MLflow UI) makes its own (mlflow_tracker.Tracker)."""
    ledger = ledger or Ledger(ledger_root)
    counts = {"pushed": 0, "sweeps": 0, "left": 0}
    by_store: dict[tuple[str, str], list] = defaultdict(list)
    for entry, data in handoff.entries(ledger_root):
        if data.kind == "run":
            try:
                record = ledger.get(data.id)
            except Exception:  # noqa: BLE001 - a record that is not there: nothing to project
                handoff.done(entry)
                continue
            log = entry / "worker.log"
            by_store[store_of(record)].append(Item(record, entry, [str(entry / "ir" / n) for n in data.ir],
                                                 log if log.exists() else None, dict(data.tags), data.owner))
        elif data.kind == "bisect":  # repro bisect: its parent in the store of its runs
            try:
                record = ledger.get(data.id)
                first = ledger.get(view(record).runs[0])
            except Exception:  # noqa: BLE001 - a record (or its runs) not there: nothing to project
                handoff.done(entry)
                continue
            by_store[store_of(first)].append(("bisect", entry, data, record))
        elif records := _sweep_records(ledger, data.id):
            by_store[store_of(records[0])].append((entry, data, records))
        else:
            handoff.done(entry)
    trackers = {}

    def open_stores(local: bool) -> None:
        for key in (k for k in by_store if k[0].startswith("sqlite:") == local):
            try:
                with handoff.quiet_turn():  # MLflow's import and the store's opening: seconds of CPU
                    trackers[key] = open_store(*key)
            except Exception as e:  # noqa: BLE001 - said below, with the store's entries
                trackers[key] = e

    open_stores(local=True)
    write_reports(ledger, handoff.entries(ledger_root))  # whatever becomes of the stores
    open_stores(local=False)  # a server, slow or unreachable, holds back no report
    failed = False
    for (uri, experiment), items in by_store.items():
        parents: dict[str, str] = {}
        try:
            tracker = trackers[(uri, experiment)]
            if isinstance(tracker, Exception):
                raise tracker
            counts["pushed"] += project_runs(tracker, [i for i in items if isinstance(i, Item)], parents)["pushed"]
            for entry, data, records in (i for i in items if not isinstance(i, Item) and len(i) == 3):
                with handoff.quiet_turn():
                    close_sweep(tracker, ledger, data, records, parents)
                handoff.done(entry)
                counts["sweeps"] += 1
            for _, entry, data, record in (i for i in items if not isinstance(i, Item) and len(i) == 4):
                from repro.tracking.project import project_bisect

                with handoff.quiet_turn():
                    project_bisect(tracker, record, data.report_dir)
                handoff.done(entry)
        except Exception as e:  # noqa: BLE001 - whatever the store does, the runs are in the ledger
            left = sum(1 for i in items if (i.entry if isinstance(i, Item) else i[-3 if len(i) == 4 else 0]).exists())
            counts["left"] += left
            failed = True
            line = failure_line(e)
            handoff.record_failure(ledger_root, uri, experiment, line, left)
            if say:
                print(f"repro projector: MLflow at {redact(uri)} (experiment {experiment!r}) failed: {line}; "
                      f"{left} entries left for `repro sync`", file=sys.stderr)
    if not failed:
        handoff.clear_failure(ledger_root)
    for tracker in trackers.values():
        if not isinstance(tracker, Exception):
            tracker.close()
    return counts


def sync_store(tracker, heads: list[dict], head_of: dict[str, dict]) -> dict[str, int]:
    """Put `heads` (runs of one store and experiment) into it; close what was left RUNNING: runs
    whose ledger chain has ended or was lost, and sweep parents whose sweep process is gone."""
    from repro.tracking.project import close_parent

    ended = [h for h in heads if view(h).status != "started"]
    counts = {**project_runs(tracker, [Item(h) for h in ended], {}), "closed": 0}
    for ledger_id, run in {r.data.tags["repro.ledger_id"]: r for r in tracker.find_runs("repro.ledger_id")}.items():
        head = head_of.get(ledger_id)
        if run.info.status != "RUNNING" or head is None:
            continue
        if view(head).status != "started" and view(head).id != ledger_id:
            tracker.end(run.info.run_id, view(head).status)
        elif state_of(head).name == "lost":
            tracker.end(run.info.run_id, "killed")
        else:
            continue
        counts["closed"] += 1
    by_sweep = defaultdict(list)
    for head in heads:
        by_sweep[view(head).sweep.id].append(head)
    for run in tracker.find_runs("repro.sweep_id"):
        runs = by_sweep.get(run.data.tags["repro.sweep_id"], [])
        if run.info.status != "RUNNING" or "mlflow.parentRunId" in run.data.tags or not runs:
            continue
        owner = {k: _number(run.data.tags.get(f"repro.sweep_{k}")) for k in ("host", "pid", "create_time")}
        if owner["host"] and not lifeline.is_gone(owner):
            continue  # the sweep is still going
        if not owner["host"] and not all(view(h).status != "started" or state_of(h).name == "lost" for h in runs):
            continue
        close_parent(tracker, run.info.run_id, runs, "ok" if all(view(h).status == "ok" for h in runs) else "failed")
        counts["closed"] += 1
    return counts


def _number(text: str | None):
    try:
        return float(text) if "." in text else int(text)
    except (TypeError, ValueError):
        return text
